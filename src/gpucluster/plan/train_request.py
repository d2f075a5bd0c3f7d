"""A training-plan request as a user states it (model, cluster or GPUs, tokens, stack), resolved
into a plan: the defaults the CLI and the Python API share, each with where it comes from.

    from gpucluster import plan_train
    plan = plan_train("llama3-70b", cluster="examples/h200-256-ndr400.yaml", tokens="2T")
    plan.best.step_s, plan.best.mfu, plan.gpu_hours, plan.confidence.assumptions
"""

from __future__ import annotations

from typing import Any

from gpucluster.api_args import PLAN_TRAIN, TRAIN_FLAGS, checked
from gpucluster.errors import UserError
from gpucluster.model.training import attention, frameworks
from gpucluster.model.training.frameworks import FRAMEWORKS
from gpucluster.model.transformer_params import parse_pipeline_layout
from gpucluster.plan.fabric_from import from_options
from gpucluster.plan.train_plan import (CHINCHILLA_TOKENS_PER_PARAM, DEFAULT_BATCH_TOKENS, TrainingPlan, plan_training,
                                       require_precision)
from gpucluster.specs.workload import TransformerSpec, load_model_spec, model_presets

PRECISIONS = ("bf16", "fp16", "fp8")
# Stack settings with a flag of their own (also accepted as layout keys), and their allowed values.
STACK_FLAGS = {"attention": "--attention", "overlap_dp_comm": "--dp-overlap", "overlap_tp_comm": "--tp-overlap",
               "moe_overlap": "--moe-overlap", "framework": "--framework", "shard_group": "--shard-group"}
# attention: "flash" is the framework's default fused kernel, the others name one (attention.py).
ATTENTION = ("flash", "unfused", *(k for k in attention.KERNELS if k != "unfused"))
CHOICES = {"recompute": ("none", "selective", "full"), "attention": ATTENTION,
           "moe_overlap": ("none", "dualpipe"), "moe_dispatcher": ("alltoall", "deepep"),
           "framework": tuple(FRAMEWORKS)}
# Names a user may give for the same choice (attention.ALIASES, frameworks.ALIASES): mapped before the check.
CANONICAL = {"attention": attention.canonical, "framework": frameworks.canonical}


def _canonical(key: str, value: Any) -> Any:
    """A choice's registry name where `value` is one of its aliases (else `value`, checked after)."""
    try:
        return CANONICAL[key](value) if key in CANONICAL and isinstance(value, str) else value
    except ValueError:
        return value

LAYOUT_KEYS = {"tp": int, "pp": int, "dp": int, "cp": int, "ep": int, "etp": int, "interleave": int, "v": int,
               "micro_batch": int, "mb": int, "sequence_parallel": bool, "sp": bool, "recompute": str, "zero": int,
               "offload_optimizer": bool, "offload": bool, "attention": str, "overlap_dp_comm": bool,
               "overlap_tp_comm": bool, "moe_overlap": str, "moe_dispatcher": str, "moe_fp8_dispatch": bool,
               "moe_imbalance": float, "zero3_prefetch_params": float, "pp_embedding_layer": bool,
               "pp_loss_layer": bool, "framework": str, "shard_group": int, "pipeline_layout": str,
               "torch_compile": bool, "fused_kernels": bool}
FLOAT_RANGE = {"moe_imbalance": (1.0, 64.0), "zero3_prefetch_params": (1.0, 1e15)}
ALIASES = {"v": "interleave", "mb": "micro_batch", "sp": "sequence_parallel", "offload": "offload_optimizer"}


def parse_layout(text: str) -> dict[str, Any]:
    """--layout's text, e.g. "tp=8,pp=4,recompute=selective", as layout keys (aliases resolved)."""
    fixed: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise UserError(f"expected key=value, got {part!r} (keys: {', '.join(sorted(LAYOUT_KEYS))})", field="--layout")
        key, value = (x.strip() for x in part.split("=", 1))
        if key not in LAYOUT_KEYS:
            raise UserError(f"unknown key {key!r} (valid: {', '.join(sorted(LAYOUT_KEYS))})", field="--layout")
        kind = LAYOUT_KEYS[key]
        try:
            if kind is bool:
                if value.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError
                parsed: Any = value.lower() in ("true", "1", "yes", "on")
            elif kind is float:
                parsed = float(value)
                low, high = FLOAT_RANGE[key]
                if not low <= parsed <= high:
                    raise ValueError
            elif kind is int:
                parsed = int(value)
                if parsed < (0 if key == "zero" else 1):
                    raise ValueError
            elif key == "pipeline_layout":
                parsed = parse_pipeline_layout(value)
            else:
                parsed = value
        except ValueError as exc:
            if key == "pipeline_layout":
                raise UserError(str(exc), field="--layout") from None
            what = (("positive integer" if kind is int else kind.__name__) if kind is not float
                    else "number from {:g} to {:g}".format(*FLOAT_RANGE[key]))
            raise UserError(f"{key}={value!r} is not a valid {what}",
                            field="--layout") from None
        fixed[ALIASES.get(key, key)] = parsed
    if "pipeline_layout" in fixed:
        fixed["stage_layers"] = fixed.pop("pipeline_layout")
    for key, allowed in CHOICES.items():
        if key in fixed:
            fixed[key] = _canonical(key, fixed[key])
        if key in fixed and fixed[key] not in allowed:
            raise UserError(f"{key} must be {', '.join(allowed)}, got {fixed[key]!r}", field="--layout")
    if "zero" in fixed and fixed["zero"] not in (0, 1, 2, 3):
        raise UserError(f"zero must be 0, 1, 2 or 3, got {fixed['zero']}", field="--layout")
    return fixed


def default_batch_tokens(model: str) -> tuple[float, str]:
    """The batch the model's publisher trained with (the preset's published_batch_tokens), else
    ~4M tokens (Llama 2's), and where the figure comes from."""
    presets = model_presets()
    if model in presets:
        preset = presets.get(model)
        if preset.published_batch_tokens is not None:
            v = preset.published_batch_tokens.value
            title = preset.sources[preset.published_batch_tokens.source].title
            return v, f"{v / 1e6:.1f}M tokens per step, as published ({title})"
    return DEFAULT_BATCH_TOKENS, (f"~{DEFAULT_BATCH_TOKENS / 2**20:.0f}M tokens per step "
                                  "(Llama 2's; the model has no published batch)")


def _tokens(tokens: int | str | None, spec: TransformerSpec) -> tuple[int, str]:
    from gpucluster.model.transformer_params import params
    from gpucluster.units import parse_count

    if tokens is None:
        return (int(CHINCHILLA_TOKENS_PER_PARAM * params(spec).active),
                f"Chinchilla: {CHINCHILLA_TOKENS_PER_PARAM} tokens per active parameter")
    try:
        n = parse_count(tokens) if isinstance(tokens, str) else int(tokens)
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc), field="--tokens") from None
    if n < 1:
        raise UserError(f"must be >= 1, got {tokens}", field="--tokens")
    return n, "given"


def merge_stack(fixed: dict[str, Any], stack: dict[str, Any]) -> dict[str, Any]:
    """Layout keys plus the stack flags; a flag and a layout key that disagree are an error."""
    out = dict(fixed)
    for key, value in stack.items():
        if value is None:
            continue
        flag = STACK_FLAGS.get(key, key)
        value = _canonical(key, value)
        if key in CHOICES and value not in CHOICES[key]:
            raise UserError(f"must be {' or '.join(CHOICES[key])}, got {value!r}", field=flag)
        if key in out and out[key] != value:
            raise UserError(f"{flag} says {value} but --layout says {key}={out[key]}", field=flag)
        out[key] = value
    if "attention" in out:
        kernel = out.pop("attention")
        out["flash_attention"] = kernel != "unfused"
        if kernel not in ("flash", "unfused"):
            out["attention_kernel"] = kernel
    if "stage_layers" in out and "interleave" not in out:
        out["interleave"] = max(1, len(out["stage_layers"]) // out.get("pp", 1))
    return out


@checked(PLAN_TRAIN, flags=TRAIN_FLAGS)
def plan_train(model: str | TransformerSpec, *, cluster: str | None = None, pool: str | None = None,
               gpu: str | None = None, nodes: int | None = None, nic: str = "NDR400",
               nics_per_node: int | None = None, tokens: int | str | None = None, global_batch: int | None = None,
               seq_len: int | None = None, layout: dict[str, Any] | str | None = None, precision: str = "bf16",
               top: int = 5, tp_across_domains: bool = False, attention: str | None = None,
               dp_overlap: bool | None = None, tp_overlap: bool | None = None,
               moe_overlap: str | None = None, framework: str | None = None,
               shard_group: int | None = None, failure_profile: str = "llama3",
               checkpoint_write_gbps: float | None = None, restart_s: float | None = None,
               checkpoint_interval: str | float | None = None) -> TrainingPlan:
    """Plan a training run: the best layouts, step time, memory, time and GPU-hours, and what the
    figures rest on (`plan.confidence`), and the run with failures, restarts and checkpoint writes
    (`plan.with_failures`: plan/train_goodput.py). Bad input raises `UserError` naming the field."""
    from gpucluster.plan.train_goodput import goodput_inputs, with_failures

    run_inputs = goodput_inputs(failure_profile, checkpoint_write_gbps, restart_s, checkpoint_interval)
    spec = model if isinstance(model, TransformerSpec) else load_model_spec(model)
    target = from_options(cluster, pool, gpu, nodes, nic, nics_per_node)
    if precision not in PRECISIONS:
        raise UserError(f"must be {', '.join(PRECISIONS)}, got {precision!r}", field="--precision")
    require_precision(target.fabric.gpu, precision)
    s = seq_len if seq_len is not None else spec.seq_len
    if s < 1:
        raise UserError(f"must be >= 1, got {s}", field="--seq-len")
    if top < 1:
        raise UserError(f"must be >= 1, got {top}", field="--top")
    budget, tokens_source = _tokens(tokens, spec)
    batch_tokens, batch_source = default_batch_tokens(model) if isinstance(model, str) else (
        DEFAULT_BATCH_TOKENS, f"~{DEFAULT_BATCH_TOKENS / 2**20:.0f}M tokens per step")
    gbs = global_batch if global_batch is not None else max(1, round(batch_tokens / s))
    if gbs < 1:
        raise UserError(f"must be >= 1, got {gbs}", field="--global-batch")
    if isinstance(layout, str):
        layout = parse_layout(layout)
    elif isinstance(layout, dict):   # from Python: the same keys and values as the text, checked the same way
        layout = parse_layout(",".join(f"{k}={v}" for k, v in layout.items()))
    if shard_group is not None and shard_group < 1:
        raise UserError(f"must be >= 1, got {shard_group}", field="--shard-group")
    fixed = merge_stack(layout or {}, {"attention": attention, "overlap_dp_comm": dp_overlap,
                                       "overlap_tp_comm": tp_overlap, "moe_overlap": moe_overlap,
                                       "framework": framework, "shard_group": shard_group})
    plan = plan_training(spec, target, gbs, budget, s, fixed=fixed, top=top, precision=precision,
                         tp_across_domains=tp_across_domains)
    plan.tokens_source = tokens_source
    plan.global_batch_source = "given" if global_batch is not None else batch_source
    plan.fixed = fixed
    plan.tp_across_domains = tp_across_domains
    plan.with_failures = with_failures(plan, run_inputs, cluster=cluster, pool=pool)
    return plan
