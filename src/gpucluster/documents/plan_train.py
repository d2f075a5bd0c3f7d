"""`gpucluster plan train --json`: schema gpucluster-plan-train/v1.

`generate` and `slurm submit` read this document back through generate/plan_schema.py, a
stricter view of the same fields (names limited to shell-safe characters, bounded integers):
tests/documents/test_plan_train_reader.py holds every field that view reads to this model."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Open, Strict

SCHEMA: Final = "gpucluster-plan-train/v1"


class Layout(Open):
    """The parallel layout and stack settings (model/training/layout.py Layout, field by field;
    a newer planner may add settings)."""
    tp: int
    pp: int
    dp: int
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    interleave: int = 1
    micro_batch: int
    global_batch: int
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    zero: int = 0
    precision: str = "bf16"
    offload_optimizer: bool = False
    flash_attention: bool = True
    overlap_dp_comm: bool = True
    overlap_tp_comm: bool = False
    moe_overlap: str = "none"
    zero3_prefetch_params: Num | None = None
    moe_dispatcher: str = "alltoall"
    moe_fp8_dispatch: bool = False
    moe_imbalance: Num | None = None
    pp_embedding_layer: bool = False
    pp_loss_layer: bool = False
    attention_kernel: str = "default"
    framework: str = "megatron"
    shard_group: int = 0
    torch_compile: bool | None = None
    fused_kernels: bool | None = None
    stage_layers: list[int] = Field(default_factory=list)


class Target(Strict):
    description: str
    gpus: int
    nodes: int
    fabric: str
    gpu: str
    gpus_per_node: int
    nic: str | None
    scale_out_link: str | None


class Range(Strict):
    lo: Num
    hi: Num


class Uncertainty(Strict):
    """The calibrated interval of the best layout's figures (catalog/data/intervals.yaml: the
    leave-one-source-out errors of the regime the plan falls in)."""
    level: Num = Field(description="the interval's coverage target, e.g. 0.8")
    regime: str = Field(description="what the prediction rests on: chip measured, framework validated, ...")
    basis: str = Field(description="the cases, sources, pooling and widening the interval comes from")
    pooled: bool = Field(description="the regime had too few cases of its own: a coarser regime's errors")
    widened: int = Field(description="unvalidated features the band was widened for")
    fallback: bool = Field(description="no cross-validated case at all: the documented fallback band")
    step_s: Range
    tokens_per_s: Range
    mfu: Range
    time_to_train_s: Range
    gpu_hours: Range
    cost_usd: Range | None


class Estimate(Strict):
    OMIT_NONE = ("step_s_interval", "distinguishable_from_best")

    layout: Layout
    step_s: Num
    step_s_interval: Range | None = Field(None, description="the calibrated interval of step_s (model/uncertainty.py)")
    distinguishable_from_best: bool | None = Field(
        None, description="ranked layouts: false when either step time lies inside the other's interval")
    terms_s: dict[str, Num] = Field(description="seconds per step by cause (compute, tp_comm, ...)")
    tokens_per_s: Num
    tokens_per_s_per_gpu: Num
    model_tflops_per_gpu: Num
    mfu: Num
    hfu: Num
    memory_bytes: dict[str, Num] = Field(description="bytes per GPU by item, with total and HBM")
    fits: bool
    dominant: str


class Price(Strict):
    usd_per_gpu_hour: Num
    source: str


class Advice(Strict):
    term: str
    share: Num
    text: str


class Search(Strict):
    considered: int
    fit: int
    rejected: dict[str, int] = Field(description="reason -> layouts rejected for it")


class MfuReference(Strict):
    """What the MFU is checked against (plan/mfu_reference.py)."""
    value: Num = Field(description="the best published MFU, a fraction of the chip's peak")
    gpu: str = Field(description="the chip of that run: the plan's own, or its nearest validated sibling "
                                 "(same vendor and architecture) when the plan's chip has no published run")
    precision: str = Field(description="the precision of that run (bf16 stands for fp16 and back)")
    borrowed: bool = Field(description="true when `gpu` is a sibling, not the plan's chip")
    source: str = Field(description="the catalog source of the figure")
    margin: Num = Field(description="added to `value` before a plan is flagged (0: see docs/training.md)")


class FailureInterval(Strict):
    level: Num = Field(description="the step time's interval level (interval.level)")
    time_to_train_s: Range
    gpu_hours: Range
    cost_usd: Range | None


class WithFailures(Strict):
    """The run with failures, restarts and checkpoint writes (plan/train_goodput.py): Daly's
    checkpoint interval for the job's MTBF, the interval `generate` writes as --save-interval."""
    goodput: Num = Field(description="failure-free time / wall time (Daly 2006 wall-clock model), in (0, 1]")
    time_to_train_s: Num = Field(description="wall time with failures, restarts and checkpoint writes")
    gpu_hours: Num
    cost_usd: Num | None = Field(description="gpu_hours at price.usd_per_gpu_hour; null without a price")
    failure_free_time_to_train_s: Num
    checkpoint_interval_s: Num = Field(description="training between checkpoints: save_interval_iterations steps")
    save_interval_iterations: int = Field(description="the same in iterations (Megatron-LM --save-interval)")
    checkpoint_interval_source: Literal["Daly", "given"]
    daly_interval_s: Num = Field(description="Daly's optimum before rounding to iterations")
    young_interval_s: Num
    mtbf_s: Num = Field(description="the job's mean time between failures (failure profile, its GPUs and nodes)")
    expected_failures: Num
    checkpoint_write_s: Num = Field(description="one blocking checkpoint write")
    checkpoint_copy_s: Num = Field(description="async copy from node-local NVMe to a durable tier, else 0")
    checkpoint_read_s: Num
    restart_overhead_s: Num = Field(description="detect, reschedule and relaunch (--restart-s)")
    restart_s: Num = Field(description="restart_overhead_s + checkpoint_read_s")
    checkpoint_bytes: Num
    storage: str
    failure_profile: str
    generate_flags: list[str] = Field(description="`generate` options that checkpoint at this interval")
    assumptions: list[str]
    interval: FailureInterval | None = Field(description="the step time's interval carried to the wall time")


class PlanTrainDocument(Document):
    schema_: Literal["gpucluster-plan-train/v1"] = Field(SCHEMA, alias="schema")
    model: str | None
    params: int
    target: Target
    tokens: int
    tokens_source: str
    global_batch: int
    seq_len: int
    layers: int
    model_spec: dict[str, Any] | None = Field(None, description="the model's shape (TransformerSpec fields), "
                                                                "which `generate` writes as framework arguments")
    best: Estimate
    ranked: list[Estimate]
    steps: Num
    time_to_train_s: Num
    gpu_hours: Num
    cost_usd: Num | None
    price: Price | None
    interval: Uncertainty
    confidence: str
    assumptions: list[str]
    above_best_published: str | None
    best_published: str | None
    mfu_reference: MfuReference | None = Field(
        None, description="the best published run the MFU is compared with (null: none on the chip or a sibling); "
                          "above it, `above_best_published` is set and repeated in `assumptions`")
    total_model_flops: Num
    six_nd_flops: Num
    advice: Advice
    search: Search
    with_failures: WithFailures | None = Field(
        None, description="time to train with failures, restarts and checkpoint writes (goodput)")


def _estimate(e: Any, iv: Any = None, apart: bool | None = None) -> Estimate:
    return Estimate(layout=Layout(**e.layout.to_dict()), step_s=e.step_s,
                    step_s_interval=None if iv is None else Range(lo=iv.lo, hi=iv.hi), distinguishable_from_best=apart,
                    terms_s=e.terms, tokens_per_s=e.tokens_per_s,
                    tokens_per_s_per_gpu=e.tokens_per_s_per_gpu, model_tflops_per_gpu=e.model_tflops_per_gpu,
                    mfu=e.mfu, hfu=e.hfu, memory_bytes=dict(e.memory.rows()), fits=e.memory.fits,
                    dominant=e.dominant)


def build(plan: Any) -> PlanTrainDocument:
    """The document of a TrainingPlan (gpucluster.plan_train's result)."""
    from gpucluster.plan.confidence import distinguishable, step_interval

    rent = plan.rental()
    tgt = plan.target
    iv = step_interval(plan)
    lo, hi = iv.lo / plan.best.step_s, iv.hi / plan.best.step_s
    ranked = []
    for i, e in enumerate(plan.search.ranked):
        ei = step_interval(plan, e)
        ranked.append(_estimate(e, ei, None if i == 0 else distinguishable(iv, ei)))
    cost = None if rent is None else rent[0] * plan.gpu_hours
    uncertainty = Uncertainty(
        level=iv.level, regime=iv.regime, basis=iv.basis, pooled=iv.pooled, widened=iv.widened, fallback=iv.fallback,
        step_s=Range(lo=iv.lo, hi=iv.hi), tokens_per_s=Range(lo=plan.best.tokens_per_s / hi, hi=plan.best.tokens_per_s / lo),
        mfu=Range(lo=plan.best.mfu / hi, hi=plan.best.mfu / lo),
        time_to_train_s=Range(lo=plan.time_to_train_s * lo, hi=plan.time_to_train_s * hi),
        gpu_hours=Range(lo=plan.gpu_hours * lo, hi=plan.gpu_hours * hi),
        cost_usd=None if cost is None else Range(lo=cost * lo, hi=cost * hi))
    return PlanTrainDocument(
        model=plan.spec.name, params=plan.params,
        target=Target(description=tgt.description, gpus=tgt.gpus, nodes=tgt.nodes, fabric=tgt.fabric.describe(),
                      **tgt.fabric.job_fields()),
        tokens=plan.tokens, tokens_source=plan.tokens_source, global_batch=plan.global_batch, seq_len=plan.seq_len,
        layers=plan.spec.layers, model_spec=plan.spec.model_dump(mode="json"), best=_estimate(plan.best, iv),
        ranked=ranked, interval=uncertainty,
        steps=plan.steps, time_to_train_s=plan.time_to_train_s, gpu_hours=plan.gpu_hours,
        cost_usd=cost,
        price=None if rent is None else Price(usd_per_gpu_hour=rent[0], source=rent[1]),
        **plan.confidence.to_json(),
        total_model_flops=plan.total_model_flops, six_nd_flops=plan.six_nd,
        advice=Advice(term=plan.advice.term, share=plan.advice.share, text=plan.advice.text),
        search=Search(considered=plan.search.considered, fit=plan.search.estimated, rejected=dict(plan.search.rejected)),
        with_failures=None if plan.with_failures is None else WithFailures(**plan.with_failures.to_json(lo, hi, iv.level)))
