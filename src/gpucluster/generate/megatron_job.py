"""The rest of a Megatron-LM command beyond the layout: the model's shape, the data and
tokenizer (placeholders the job refuses to start with), the run's length, and checkpoints at
the reliability model's interval, resumed from.

Checkpoint interval (docs/engines.md, "Long runs"): Daly's optimum (Daly 2006, eq. 37; the
reliability model's `plan_interval`) for
- the job's mean time between failures: the failure profile's rates for its GPUs and nodes
  (catalog failures.yaml, profile llama3 by default; rates add, MTBF falls as 1/N);
- one blocking checkpoint write: from the cluster's storage tiers when `--cluster` is given
  (the tier `gpucluster reliability` picks), else the checkpoint's size (weights + optimizer
  state, model/checkpoint.py) over `--checkpoint-write-gbps` (an input; its default is an
  assumption the job file and stderr say);
- or the interval the user gives (`--checkpoint-interval`).
It is written as `--save-interval` iterations of the plan's step time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucluster.errors import UserError
from gpucluster.units import format_duration

if TYPE_CHECKING:
    from gpucluster.generate.plan_file import JobPlan
    from gpucluster.specs.workload import TransformerSpec

# Aggregate write bandwidth to the shared filesystem when the cluster is not described: an
# assumption (a mid-size parallel filesystem), said wherever it is used; --cluster or
# --checkpoint-write-gbps replace it.
DEFAULT_WRITE_GBPS = 10.0
# Time kept before a Slurm time limit for the last save: one step to finish, the write, and a
# minute for Megatron-LM to notice (it checks the elapsed time every iteration) and exit.
EXIT_SLACK_S = 60.0

# The job's inputs the plan cannot know: (variable, what it holds). The job refuses to start
# until each is set.
PLACEHOLDERS = (
    ("DATA_PATH", "Megatron-LM dataset prefix (tools/preprocess_data.py output, without .bin/.idx)"),
    ("TOKENIZER_MODEL", "Hugging Face tokenizer name or path"),
    ("CHECKPOINT_DIR", "directory on a filesystem every node shares: checkpoints are saved to and resumed from it"),
)


@dataclass(frozen=True)
class Checkpointing:
    """When the job saves, from what."""
    interval_s: float          # wall seconds of training between checkpoints
    save_interval: int         # the same in iterations
    write_s: float             # one blocking write
    mtbf_s: float
    goodput: float             # Daly's wall-clock model at this interval
    how: str                   # one line: where the interval comes from
    assumption: str | None = None   # set when a default stands in for the storage


def checkpointing(plan: JobPlan, spec: TransformerSpec | None, *, cluster: str | None = None,
                  write_gbps: float | None = None, interval: str | None = None,
                  profile: str = "llama3") -> Checkpointing:
    from gpucluster.catalog.operations import operations
    from gpucluster.model.checkpoint import checkpoint_size
    from gpucluster.model.reliability import plan_interval
    from gpucluster.plan.reliability_plan import load_failure_model

    step = plan.step_s
    if not step > 0:
        raise UserError("the plan's step time is 0: no checkpoint interval in iterations", file=plan.source or None,
                        field="best.step_s")
    fm = load_failure_model(profile)
    mtbf_s = 3600.0 / fm.rate_per_hour(plan.gpus, plan.gpus_per_node)
    given = _interval_s(interval)
    assumption = None
    if cluster is not None:
        if spec is None:
            raise _no_spec(plan)
        from gpucluster.plan.reliability_plan import reliability_plan
        from gpucluster.specs.cluster import load_cluster

        rel = reliability_plan(load_cluster(cluster), spec, profile=profile, nodes=plan.nodes,
                               precision=_ckpt_precision(plan))
        opt = rel.best
        ip = opt.optimal if given is None else plan_interval(opt.option.delta_s, rel.mtbf_s, opt.optimal.restart_s, interval_s=given,
                               extra_loss_s=opt.option.copy_s)
        how = (f"Daly's interval for a failure every {format_duration(rel.mtbf_s)} and a "
               f"{format_duration(opt.option.delta_s)} write to {opt.option.name} ({cluster})")
        write_s, mtbf_s = opt.option.delta_s, rel.mtbf_s
    else:
        if spec is None and given is None:
            raise _no_spec(plan)
        gbps = DEFAULT_WRITE_GBPS if write_gbps is None else write_gbps
        # Finite and at most 10^6 GB/s (a PB/s): inf, or 1e308 (a write time that rounds to 0 s), made
        # the reliability model raise ValueError (issue 23, found by the fuzzer's `anyopt` kind).
        if not (isinstance(gbps, (int, float)) and math.isfinite(gbps) and 0 < gbps <= 1e6):
            raise UserError(f"must be a finite number > 0 and <= 1e+06 GB/s, got {gbps}", field="--checkpoint-write-gbps")
        size = checkpoint_size(spec, _ckpt_precision(plan)).total_bytes if spec is not None else None
        # No model shape (an old plan of a YAML model, with --checkpoint-interval): a minute's write
        # is assumed, used only to keep time for the last save before a Slurm time limit.
        write_s = size / (gbps * 1e9) if size is not None else 60.0
        ops, _ = operations()
        restart = ops.restart_overhead_s.value + write_s     # read back about as fast as written
        ip = plan_interval(write_s, mtbf_s, restart, interval_s=given)
        how = (f"Daly's interval for a failure every {format_duration(mtbf_s)} ({fm.profile} failure rates, "
               f"{plan.gpus} GPUs) and a {format_duration(write_s)} write")
        if size is None:
            assumption = "the plan has no model shape: a 60 s checkpoint write is assumed"
        elif write_gbps is None:
            assumption = (f"checkpoint write time assumes {DEFAULT_WRITE_GBPS:g} GB/s to shared storage "
                          f"({size / 1e9:,.0f} GB); give --cluster or --checkpoint-write-gbps")
    if given is not None:
        how = f"every {format_duration(given)} (--checkpoint-interval)"
    save = max(1, round(ip.interval_s / step))
    return Checkpointing(interval_s=save * step, save_interval=save, write_s=write_s, mtbf_s=mtbf_s,
                         goodput=ip.goodput, how=how, assumption=assumption)


def _ckpt_precision(plan: JobPlan) -> str:
    return str(plan.layout.get("precision", "bf16"))


def _no_spec(plan: JobPlan) -> UserError:
    return UserError(f"the plan does not describe the model {plan.model!r} (written before plans carried "
                     "model_spec, and not a preset): re-run `gpucluster plan train --json`, or give "
                     "--checkpoint-interval", file=plan.source or None, field="model_spec")


def _interval_s(text: str | None) -> float | None:
    if text is None:
        return None
    from gpucluster.specs.durations import parse_duration

    try:
        value = parse_duration(text, "s")
    except ValueError:
        raise UserError(f"not a duration: {text[:40]!r} (e.g. 30m, 2h, 1800)", field="--checkpoint-interval") from None
    if not value > 0 or math.isinf(value):
        raise UserError(f"must be > 0, got {text[:40]!r}", field="--checkpoint-interval")
    return value


def exit_minutes(ck: Checkpointing, step_s: float, limit_s: float | None) -> int | None:
    """`--exit-duration-in-mins` for a Slurm time limit: Megatron-LM saves and exits this long
    after it starts, before the limit kills it; None when the limit leaves no such minute."""
    if limit_s is None:
        return None
    minutes = math.floor((limit_s - ck.write_s - step_s - EXIT_SLACK_S) / 60)
    return minutes if minutes >= 1 else None


def job_args(plan: JobPlan, spec: TransformerSpec | None, ck: Checkpointing | None,
             var: Callable[[str], str], exit_mins: int | None = None) -> list[str]:
    """Data, tokenizer, length and checkpoint arguments; `var(NAME)` spells a placeholder's value
    in the target language ("$NAME" in a shell, "$(NAME)" in a Kubernetes command)."""
    out = ["--data-path", var("DATA_PATH"), "--tokenizer-type=HuggingFaceTokenizer", "--tokenizer-model",
           var("TOKENIZER_MODEL")]
    if plan.train_iters is not None:
        out.append(f"--train-iters={plan.train_iters}")
    if ck is not None:
        out += ["--save", var("CHECKPOINT_DIR"), "--load", var("CHECKPOINT_DIR"), f"--save-interval={ck.save_interval}"]
        if exit_mins is not None:
            out.append(f"--exit-duration-in-mins={exit_mins}")
    return out


def placeholder_help(spec: TransformerSpec | None) -> list[tuple[str, str]]:
    """(variable, what to put in it), the tokenizer with the vocabulary the plan assumed."""
    out = []
    for name, what in PLACEHOLDERS:
        if name == "TOKENIZER_MODEL" and spec is not None:
            what += f" with the plan's vocabulary ({spec.vocab:,} tokens)"
        out.append((name, what))
    return out
