"""Predict `training` validation cases: the planner on the case's hardware, model and layout.

Every field a case states is a fact about the run and is used as stated; a field it
leaves out takes its documented default (the stack: `STACK_DEFAULTS`) or, for the
layout, the planner's search (the fastest layout that fits, as the source's engineers
would have tuned it). Nothing is read from `source` or `notes`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from gpucluster.model.training import attention, frameworks, moe
from gpucluster.model.training.layout import Layout, problems
from gpucluster.model.transformer_params import parse_pipeline_layout
from gpucluster.model.training.step import estimate
from gpucluster.plan.train_search import search
from gpucluster.specs.validation_case import Case, Hardware
from gpucluster.specs.workload import TransformerSpec
from gpucluster.validate.conventions import default_flops_counted, predicted_figures
from gpucluster.validate.predictors import Unsupported, fabric_for, predictors, section

# What a run used when its case does not say (shared/validation/README.md): the attention
# kernel is the framework's own fused one; overlap_dp_comm "framework": the framework's default
# for ZeRO 0-2 (Megatron-LM's --overlap-grad-reduce and DeepSpeed's overlap_comm are opt-in,
# NeMo, FSDP trainers and nanotron's DDP overlap), while ZeRO-3 / FSDP prefetch and reduce
# asynchronously by design. (`plan train` instead assumes the tuned stack it recommends:
# overlap on.) The framework and the FLOPs convention have rules of their own below.
STACK_DEFAULTS: dict[str, Any] = {"attention": "flash", "overlap_dp_comm": "framework", "overlap_tp_comm": False,
                                  "moe_fp8_dispatch": False, "moe_imbalance": None, "zero3_prefetch_params": 5e8}
# `attention`: "flash" is the framework's default fused kernel (frameworks.Framework.attention),
# "unfused" the s x s scores in HBM, the others a named kernel or its alias (model/training/attention.py).


class Training(BaseModel):
    model_config = ConfigDict(extra="forbid")
    global_batch: PositiveInt
    micro_batch: PositiveInt | None = None
    tp: PositiveInt | None = None
    pp: PositiveInt | None = None
    dp: PositiveInt | None = None
    cp: PositiveInt | None = None
    ep: PositiveInt | None = None       # default 1 for a dense model; a MoE model's is searched
    etp: PositiveInt | None = None      # expert tensor parallel; default tp (1 where only folding fits)
    interleave: PositiveInt | None = None
    sequence_parallel: bool | None = None
    recompute: Literal["none", "selective", "full"] | None = None
    zero: Literal[0, 1, 2, 3] | None = None
    precision: Literal["fp16", "bf16", "fp8"] = "bf16"
    attention: str = STACK_DEFAULTS["attention"]    # attention.canonical: flash, unfused or a kernel
    framework: str | None = None        # frameworks.FRAMEWORKS; default: default_framework()
    shard_group: PositiveInt | None = None  # HSDP: GPUs one ZeRO-3 shard group spans; default all of dp x cp
    # Explicit pipeline layout: Megatron-Core's --pipeline-model-parallel-layout string, or the
    # transformer layers of each virtual stage (pp x interleave entries, schedule order).
    pipeline_layout: str | list[int] | None = None
    # What a measured TFLOP/s or MFU counts (validate/conventions.py); default: default_flops_counted().
    flops_counted: Literal["model", "hardware"] | None = None
    overlap_dp_comm: bool | Literal["framework"] = STACK_DEFAULTS["overlap_dp_comm"]
    overlap_tp_comm: bool = STACK_DEFAULTS["overlap_tp_comm"]
    moe_overlap: Literal["none", "dualpipe"] | None = None          # default: the framework's
    moe_dispatcher: Literal["alltoall", "deepep"] | None = None     # default: the framework's
    torch_compile: bool | None = None                               # default: the framework's
    fused_kernels: bool | None = None                               # default: the framework's
    moe_fp8_dispatch: bool = STACK_DEFAULTS["moe_fp8_dispatch"]
    moe_imbalance: float | None = Field(STACK_DEFAULTS["moe_imbalance"], ge=1.0, le=64.0)  # None: moe.py default
    zero3_prefetch_params: float = Field(STACK_DEFAULTS["zero3_prefetch_params"], ge=1.0, le=1e15)
    pp_embedding_layer: bool | None = None
    pp_loss_layer: bool | None = None

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, v: str | None) -> str | None:
        return None if v is None else frameworks.canonical(v)  # ValueError naming the valid ones

    @field_validator("attention")
    @classmethod
    def _known_attention(cls, v: str) -> str:
        return attention.canonical(v)

    @field_validator("pipeline_layout")
    @classmethod
    def _layout(cls, v: str | list[int] | None) -> str | list[int] | None:
        if isinstance(v, str):
            parse_pipeline_layout(v)
        return v


LAYOUT_FIELDS = {"tp", "pp", "dp", "cp", "ep", "interleave", "micro_batch", "sequence_parallel", "recompute", "zero"}


def default_framework(tr: Training) -> str:
    """The framework of a case that names none (documented in docs/training.md), from stated
    fields only. A run that shards with zero: 3 and no pipeline (pp 1 or not stated) is a
    PyTorch FSDP-style trainer (`fsdp`: FSDP, FSDP2, fairscale, lit-gpt; `torchtitan` where it
    states context parallelism, which those trainers lack), unless it states
    unfused attention without tensor parallelism: before FlashAttention (2022 and earlier)
    ZeRO-3 without model parallelism was DeepSpeed's (`deepspeed`), while ZeRO-3 beside
    Megatron tensor parallelism was fairscale's FSDP (metaseq). A run that overlaps the expert
    all-to-all DualPipe-style on a pipeline without virtual stages ran DeepSeek's DualPipe
    (`deepseek`): Megatron-Core's overlap needs virtual stages when pp > 1. Every other run is
    Megatron-LM / Megatron-Core (`megatron`)."""
    if tr.framework is not None:
        return tr.framework
    if tr.moe_overlap == "dualpipe" and (tr.pp or 1) > 1 and (tr.interleave or 1) == 1:
        return "deepseek"
    if tr.zero == 3 and (tr.pp or 1) == 1:
        if (tr.cp or 1) > 1:
            return "torchtitan"   # FSDP2 with context parallelism: the PyTorch-native trainer that has it
        return "deepspeed" if tr.attention == "unfused" and (tr.tp or 1) == 1 else "fsdp"
    return frameworks.DEFAULT_FRAMEWORK


def _pipeline_accounting(spec: TransformerSpec, given: dict[str, Any]) -> None:
    """A stated interleaved layout whose layers do not split evenly ran with Megatron-Core's
    embedding/loss accounting (the only way Megatron-Core accepts it without an explicit
    pipeline layout): apply it."""
    pp, v = given.get("pp", 1), given.get("interleave", 1)
    if "stage_layers" in given or "pp_embedding_layer" in given or "pp_loss_layer" in given or pp * v <= 1 \
            or spec.layers % (pp * v) == 0:
        return
    for emb, loss in ((True, True), (True, False), (False, True)):
        if (spec.layers + emb + loss) % (pp * v) == 0:
            given["pp_embedding_layer"], given["pp_loss_layer"] = emb, loss
            return


@predictors.register("training")
def predict_training(case: Case) -> dict[str, float]:
    hw: Hardware = section(Hardware, case.hardware, "hardware")
    spec: TransformerSpec = section(TransformerSpec, getattr(case, "model", None), "model")
    tr: Training = section(Training, getattr(case, "training", None), "training")
    fab = fabric_for(hw)
    given = stated_layout(spec, tr)
    if LAYOUT_FIELDS <= given.keys():
        if "etp" not in given and (given["dp"] * given["cp"]) % given["ep"]:
            given["etp"] = 1   # the only way Megatron-Core runs an EP group larger than dp x cp
        lay = Layout(global_batch=tr.global_batch, **given)
        why = problems(spec, lay, hw.gpus)
        if why:
            raise Unsupported(f"training: {why[0]}")
        # The source ran this layout: predict its speed even where our memory model says it
        # would not fit (the estimate still carries the memory figures).
        est = estimate(spec, lay, fab)
    else:
        res = search(spec, fab, hw.gpus, tr.global_batch, fixed=given, top=1)
        if res.best is None:
            reason = res.rejected.most_common(1)[0][0] if res.rejected else "no layout matches the stated fields"
            if res.smallest_misfit is not None:
                reason = (f"every layout with the stated fields runs out of memory (leanest: "
                          f"{res.smallest_misfit.memory.total / 2**30:.0f} GiB per GPU)")
            raise Unsupported(f"training: {reason}")
        est = res.best
    counted = tr.flops_counted or default_flops_counted(tr.attention, tr.recompute is not None)
    return predicted_figures(est, counted) | {
        "_compute_share": est.terms["compute"] / est.step_s}


def defaults_taken(case: Case) -> list[str]:
    """The documented defaults a case took for the stack settings it does not state (validate
    shows them beside its prediction)."""
    try:
        tr: Training = section(Training, getattr(case, "training", None), "training")
    except Unsupported:
        return []
    out = []
    fw = default_framework(tr)
    if tr.framework is None:
        why = {"fsdp": "zero: 3 without pipeline parallelism",
               "torchtitan": "zero: 3 with context parallelism and no pipeline: FSDP2 with CP",
               "deepseek": "moe_overlap: dualpipe on a pipeline without virtual stages, DeepSeek's DualPipe",
               "deepspeed": "zero: 3, unfused attention, no model parallelism"}.get(fw, "the default stack")
        out.append(f"framework: {fw} ({why}; docs/training.md)")
    if tr.attention == "flash":
        kernel = frameworks.get(fw).attention
        kernel = "the chip generation's kernel (model/training/attention.py)" if kernel == "default" else kernel
        out.append(f"attention: flash = {kernel}, {fw}'s fused kernel")
    if tr.moe_imbalance is None and _is_moe(case):
        out.append(f"moe_imbalance: {moe.DEFAULT_MOE_IMBALANCE:g} ({moe.DEFAULT_MOE_IMBALANCE_SOURCE})")
    if tr.flops_counted is None and any(k in case.measured for k in ("tflops_per_gpu", "mfu")):
        counted = default_flops_counted(tr.attention, tr.recompute is not None)
        out.append(f"flops_counted: {counted} (recompute {'' if counted == 'hardware' else 'not '}counted; "
                   "validate/conventions.py)")
    return out


def _is_moe(case: Case) -> bool:
    try:
        return section(TransformerSpec, getattr(case, "model", None), "model").is_moe
    except Unsupported:
        return False


def stated_layout(spec: TransformerSpec, tr: Training) -> dict[str, Any]:
    """The Layout fields a case states, with the documented defaults of what it leaves out
    (the framework, a dense model's ep, the overlap a framework runs); the rest is searched."""
    skip = {"global_batch", "attention", "framework", "pipeline_layout", "flops_counted"}
    given: dict[str, Any] = {k: v for k, v in tr.model_dump().items() if v is not None and k not in skip}
    given["framework"] = fw = default_framework(tr)
    stack = frameworks.get(fw)
    given.setdefault("moe_dispatcher", stack.moe_dispatcher)
    given.setdefault("moe_overlap", stack.moe_overlap)
    given["flash_attention"] = tr.attention != "unfused"
    given["attention_kernel"] = "default" if tr.attention in ("flash", "unfused") else tr.attention
    if not spec.is_moe:
        given.setdefault("ep", 1)   # a dense model has no expert parallelism to choose
    if tr.pipeline_layout is not None:
        stages = (parse_pipeline_layout(tr.pipeline_layout) if isinstance(tr.pipeline_layout, str)
                  else tuple(tr.pipeline_layout))
        given["stage_layers"] = stages
        pp = given.setdefault("pp", 1)
        given.setdefault("interleave", max(1, len(stages) // pp))
    _pipeline_accounting(spec, given)
    if given.get("overlap_dp_comm") == "framework" and "zero" in given:
        given["overlap_dp_comm"] = given["zero"] >= 3 or stack.overlap_dp_comm
    return given
