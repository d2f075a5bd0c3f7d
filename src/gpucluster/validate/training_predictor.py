"""Predict `training` validation cases: the planner on the case's hardware, model and layout.

Layout fields the case leaves out are searched, as the source's engineers would
have tuned them (the fastest layout that fits)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PositiveInt

from gpucluster.model.training.layout import Layout, problems
from gpucluster.model.training.step import estimate
from gpucluster.plan.train_search import search
from gpucluster.specs.validation_case import Case, Hardware
from gpucluster.specs.workload import TransformerSpec
from gpucluster.validate.conventions import conventions_for
from gpucluster.validate.predictors import Unsupported, fabric_for, predictors, section


class Training(BaseModel):
    model_config = ConfigDict(extra="forbid")
    global_batch: PositiveInt
    micro_batch: PositiveInt | None = None
    tp: PositiveInt | None = None
    pp: PositiveInt | None = None
    dp: PositiveInt | None = None
    cp: PositiveInt | None = None
    ep: PositiveInt | None = None
    interleave: PositiveInt | None = None
    sequence_parallel: bool | None = None
    recompute: Literal["none", "selective", "full"] | None = None
    zero: Literal[0, 1, 2, 3] | None = None
    precision: Literal["fp16", "bf16", "fp8"] = "bf16"
    attention: Literal["flash", "unfused"] = "flash"


@predictors.register("training")
def predict_training(case: Case) -> dict[str, float]:
    hw: Hardware = section(Hardware, case.hardware, "hardware")
    spec: TransformerSpec = section(TransformerSpec, getattr(case, "model", None), "model")
    tr: Training = section(Training, getattr(case, "training", None), "training")
    fab = fabric_for(hw)
    conv = conventions_for(case.source)
    given: dict[str, Any] = {k: v for k, v in tr.model_dump().items() if v is not None and k != "global_batch"}
    given["flash_attention"] = given.pop("attention") == "flash"
    full = {"tp", "pp", "dp", "cp", "ep", "interleave", "micro_batch", "sequence_parallel", "recompute", "zero"}
    if full <= given.keys():
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
            raise Unsupported(f"no layout with the given fields fits ({', '.join(f'{k}={v}' for k, v in given.items())})")
        est = res.best
    tflops = est.hardware_tflops_per_gpu if conv.tflops_include_recompute else est.model_tflops_per_gpu
    return {"iteration_s": est.step_s, "tflops_per_gpu": tflops, "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
            "mfu": est.mfu, "_compute_share": est.terms["compute"] / est.step_s}
