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
    moe_imbalance: Num = 1.0
    pp_embedding_layer: bool = False
    pp_loss_layer: bool = False


class Target(Strict):
    description: str
    gpus: int
    nodes: int
    fabric: str
    gpu: str
    gpus_per_node: int
    nic: str | None
    scale_out_link: str | None


class Estimate(Strict):
    layout: Layout
    step_s: Num
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
    confidence: str
    assumptions: list[str]
    above_best_published: str | None
    best_published: str | None
    total_model_flops: Num
    six_nd_flops: Num
    advice: Advice
    search: Search


def _estimate(e: Any) -> Estimate:
    return Estimate(layout=Layout(**e.layout.to_dict()), step_s=e.step_s, terms_s=e.terms, tokens_per_s=e.tokens_per_s,
                    tokens_per_s_per_gpu=e.tokens_per_s_per_gpu, model_tflops_per_gpu=e.model_tflops_per_gpu,
                    mfu=e.mfu, hfu=e.hfu, memory_bytes=dict(e.memory.rows()), fits=e.memory.fits,
                    dominant=e.dominant)


def build(plan: Any) -> PlanTrainDocument:
    """The document of a TrainingPlan (gpucluster.plan_train's result)."""
    rent = plan.rental()
    tgt = plan.target
    return PlanTrainDocument(
        model=plan.spec.name, params=plan.params,
        target=Target(description=tgt.description, gpus=tgt.gpus, nodes=tgt.nodes, fabric=tgt.fabric.describe(),
                      **tgt.fabric.job_fields()),
        tokens=plan.tokens, tokens_source=plan.tokens_source, global_batch=plan.global_batch, seq_len=plan.seq_len,
        layers=plan.spec.layers,
        model_spec=plan.spec.model_dump(mode="json"), best=_estimate(plan.best), ranked=[_estimate(e) for e in plan.search.ranked],
        steps=plan.steps, time_to_train_s=plan.time_to_train_s, gpu_hours=plan.gpu_hours,
        cost_usd=None if rent is None else rent[0] * plan.gpu_hours,
        price=None if rent is None else Price(usd_per_gpu_hour=rent[0], source=rent[1]),
        **plan.confidence.to_json(),
        total_model_flops=plan.total_model_flops, six_nd_flops=plan.six_nd,
        advice=Advice(term=plan.advice.term, share=plan.advice.share, text=plan.advice.text),
        search=Search(considered=plan.search.considered, fit=plan.search.estimated, rejected=dict(plan.search.rejected)))
