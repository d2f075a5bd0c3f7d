"""An sbatch script from a plan: one torchrun per node under srun, c10d rendezvous on the first node."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpucluster.errors import UserError
from gpucluster.generate.nccl import nccl_env
from gpucluster.generate.plan_file import JobPlan
from gpucluster.generate.quoting import check_text, comment, sh, sh_join, slurm_directive
from gpucluster.generate.torchrun import Launch, torchrun_words


@dataclass(frozen=True)
class SlurmOptions:
    job_name: str = "train"
    time: str = "48:00:00"
    partition: str | None = None
    account: str | None = None
    gres_type: str | None = None      # default: the GPU's short name, lowercase (h100)
    socket_ifname: str | None = None
    exclusive: bool = True

    def __post_init__(self) -> None:
        check_text(self.job_name, "--job-name")
        check_text(self.time, "--time")
        check_slurm_time(self.time)
        for f, v in (("--partition", self.partition), ("--account", self.account),
                     ("--gres-type", self.gres_type), ("--socket-ifname", self.socket_ifname)):
            if v is not None:
                check_text(v, f)


# sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit (Slurm also reads -1 as no limit,
# but a negative number is far more often a mistake: UNLIMITED says it).
_SLURM_TIME = re.compile(r"\d{1,9}(:\d{1,2}){0,2}|\d{1,5}-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)


def check_slurm_time(value: str) -> str:
    if not _SLURM_TIME.fullmatch(value):
        raise UserError(f"not a Slurm time limit: {value[:40]!r} (minutes, H:M:S, D-H:M:S or UNLIMITED, "
                        "e.g. 48:00:00)", field="--time")
    return value


def slurm_time_s(value: str) -> float | None:
    """Seconds in a Slurm time limit (sbatch(1) formats); None for no limit."""
    v = value.strip().upper()
    if v in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = v.rpartition("-") if "-" in v else ("", "", v)
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, sec = (parts + [0, 0])[:3]            # D-H, D-H:M, D-H:M:S
    elif len(parts) == 1:
        h, m, sec = 0, parts[0], 0                  # M
    elif len(parts) == 2:
        h, m, sec = 0, parts[0], parts[1]           # M:S
    else:
        h, m, sec = parts                           # H:M:S
    return ((int(days or 0) * 24 + h) * 60 + m) * 60.0 + sec


def chain_links(plan: JobPlan, ck, limit_s: float | None) -> int:
    """Jobs in the chain: the run's wall time (the plan's steps at Daly's goodput) over what one
    job trains before its time limit, plus one job per expected failure (a failure ends a job
    early; the next resumes), plus one spare."""
    if limit_s is None or plan.train_iters is None:
        return 2
    from gpucluster.generate.megatron_job import EXIT_SLACK_S

    wall = plan.train_iters * plan.step_s / max(ck.goodput, 1e-6)
    usable = max(limit_s - ck.write_s - EXIT_SLACK_S, 60.0)
    return math.ceil(wall / usable) + math.ceil(wall / ck.mtbf_s) + 1


def gres_type(gpu: str) -> str:
    """The short GRES type a site would give the GPU: its shortest catalog name, lowercase."""
    from gpucluster.catalog import catalog

    if gpu not in catalog.gpus:
        return gpu.lower()
    entry = catalog.gpus.get(gpu)
    return min([entry.name, *entry.aliases], key=lambda n: (len(n), n)).lower()


def sbatch_script(plan: JobPlan, launch: Launch, opts: SlurmOptions) -> str:
    lay = plan.layout
    d = slurm_directive
    lines = ["#!/bin/bash",
             f"# gpucluster generate slurm: {comment(plan.model)} on {plan.nodes} x {plan.gpus_per_node} "
             f"{comment(plan.gpu)}",
             f"# layout tp={lay['tp']} pp={lay['pp']} dp={lay['dp']} cp={lay.get('cp', 1)} "
             f"ep={lay.get('ep', 1)} micro_batch={lay['micro_batch']} global_batch={lay['global_batch']}; "
             f"predicted step {plan.step_s:.3g} s",
             f"#SBATCH --job-name={d(opts.job_name)}",
             f"#SBATCH --nodes={plan.nodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --gres=gpu:{d(opts.gres_type or gres_type(plan.gpu))}:{plan.gpus_per_node}"]
    if opts.exclusive:
        lines.append("#SBATCH --exclusive")
    lines.append(f"#SBATCH --time={d(opts.time)}")
    if opts.partition:
        lines.append(f"#SBATCH --partition={d(opts.partition)}")
    if opts.account:
        lines.append(f"#SBATCH --account={d(opts.account)}")
    megatron = launch.arg_style == "megatron"
    exit_mins = None
    if megatron:
        from gpucluster.generate.megatron_job import exit_minutes
        from gpucluster.generate.torchrun import checkpoint_of, megatron_program

        ck = checkpoint_of(plan, launch)
        limit_s = slurm_time_s(opts.time)
        exit_mins = exit_minutes(ck, plan.step_s, limit_s)
        env = megatron_program(plan, launch).env
    lines += ["", "set -euo pipefail"]
    if megatron:
        lines += _placeholders(plan) + _chain(plan, ck, limit_s, exit_mins)
    lines.append(f"# NCCL for the {comment(plan.scale_out_link or 'single-node')} fabric")
    for name, value, why in nccl_env(plan, opts.socket_ifname):
        lines.append(f"export {name}={sh(value)}  # {comment(why)}")
    if megatron:
        for name, val in env.items():
            lines.append(f"unset {name}  # Megatron-FSDP needs more than one CUDA connection (validate_args)"
                         if val is None else
                         f"export {name}={sh(val)}  # tensor/context parallelism before Blackwell (validate_args)")
    lines += ["# the first node; sed reads to the end, so scontrol gets no SIGPIPE under pipefail (head would)",
              'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
              "export MASTER_ADDR",
              f"export MASTER_PORT={launch.port}",
              'echo "job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s), rendezvous $MASTER_ADDR:$MASTER_PORT"']
    words = torchrun_words(plan, launch, nnodes="$SLURM_JOB_NUM_NODES", endpoint="$MASTER_ADDR:$MASTER_PORT",
                           rdzv_id="$SLURM_JOB_ID", exit_mins=exit_mins)
    lines.append("srun --kill-on-bad-exit=1 " + sh_join(words))
    return "\n".join(lines) + "\n"


def _placeholders(plan: JobPlan) -> list[str]:
    """The job's inputs the plan cannot know: the script stops (exit 2) until each is set,
    here or in the environment sbatch passes on."""
    from gpucluster.generate.megatron_job import placeholder_help
    from gpucluster.generate.megatron_model import model_spec

    helps = placeholder_help(model_spec(plan))
    lines = ["# --- fill these in (or export them before sbatch): the job stops until each is set ---"]
    for name, what in helps:
        lines.append(f'{name}="${{{name}:-}}"  # {comment(what)}')
    names = " ".join(n for n, _ in helps)
    lines += [f"for v in {names}; do",
              '  if [ -z "${!v}" ]; then echo "error: set $v in this script or the environment (see the comments '
              'above)" >&2; exit 2; fi',
              "done"]
    return lines


def _chain(plan: JobPlan, ck, limit_s: float | None, exit_mins: int | None) -> list[str]:
    """Checkpoints and a chain of jobs: each job submits its successor (afterany: it starts when
    this one ends, whether it completed, failed or hit the time limit) and resumes from the
    latest checkpoint; a job that finds training done ends at once."""
    from gpucluster.units import format_duration

    links = chain_links(plan, ck, limit_s)
    lines = [f"# checkpoints every {ck.save_interval} iterations ({format_duration(ck.interval_s)}): {comment(ck.how)}"]
    if ck.assumption:
        lines.append(f"# assumption: {comment(ck.assumption)}")
    from gpucluster.generate.megatron_model import model_spec, rope_note

    rope = rope_note(model_spec(plan))
    if rope:
        lines.append(f"# note: {comment(rope)}")
    if exit_mins is not None:
        lines.append(f"# Megatron-LM saves and exits after {exit_mins} min (--exit-duration-in-mins), before the time "
                     "limit")
    elif limit_s is not None:
        lines.append("# the time limit leaves no minute for a last save: progress is kept by --save-interval alone")
    iters = plan.train_iters if plan.train_iters is not None else 0
    lines += [f"# a chain of up to {links} jobs (the run, over the time limit, plus one per expected failure, plus one)",
              f"TRAIN_ITERS={iters}",
              f'CHAIN_LEFT="${{GPUCLUSTER_CHAIN_LEFT:-{links}}}"',
              'DONE_ITERS="$(cat "$CHECKPOINT_DIR/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)"',
              'if [ "$DONE_ITERS" = release ] || { [ "$TRAIN_ITERS" -gt 0 ] && [ "$DONE_ITERS" -ge "$TRAIN_ITERS" ]; }; then',
              '  echo "training done: checkpoint at iteration $DONE_ITERS of $TRAIN_ITERS in $CHECKPOINT_DIR"; exit 0',
              "fi",
              'if [ "$CHAIN_LEFT" -gt 1 ]; then',
              '  sbatch --dependency="afterany:$SLURM_JOB_ID" --export="ALL,GPUCLUSTER_CHAIN_LEFT=$((CHAIN_LEFT - 1))" "$0"',
              "else",
              '  echo "warning: last job of the chain: resubmit this script to continue from $CHECKPOINT_DIR" >&2',
              "fi",
              'echo "resuming from iteration $DONE_ITERS of $TRAIN_ITERS ($CHAIN_LEFT job(s) left in the chain)"']
    return lines
