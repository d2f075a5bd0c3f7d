"""Predict `inference` validation cases: static-batch generation throughput of one replica.

A case gives the hardware, the model and `serving: {tp, batch, input_tokens,
output_tokens, precision, kv_precision}` (shared/validation/README.md). The batch runs
as the sources' benchmarks run it (TensorRT-LLM's benchmarks/python/benchmark.py, vLLM's
benchmark_latency.py): one prefill of all prompts, which emits the first output token,
then output_tokens - 1 decode steps; tokens_per_s = batch x output_tokens / that latency.

When hardware.gpus holds several replicas (gpus = tp x pp x replicas), the batch is split
evenly over them and they run side by side.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt

from gpucluster.model.serving.kv_cache import KV_BYTES, Quant, replica_memory
from gpucluster.model.serving.step_time import Replica, decode_step_time, prefill_time
from gpucluster.model.transformer_params import layout_problems
from gpucluster.specs.validation_case import Case, Hardware
from gpucluster.specs.workload import TransformerSpec
from gpucluster.validate.predictors import Unsupported, fabric_for, predictors, section



class Serving(BaseModel):
    model_config = ConfigDict(extra="forbid")
    batch: PositiveInt
    input_tokens: PositiveInt
    output_tokens: PositiveInt
    tp: PositiveInt | None = None
    pp: PositiveInt = 1
    precision: Literal["bf16", "fp16", "fp8", "int8", "int4", "fp4"] = "bf16"
    kv_precision: Literal["bf16", "fp16", "fp8", "int8"] | None = None


def replica_for(case: Case, calibrated: bool = True) -> tuple[Replica, Serving, int]:
    """The case's replica, its serving section and the number of replicas."""
    hw: Hardware = section(Hardware, case.hardware, "hardware")
    spec: TransformerSpec = section(TransformerSpec, getattr(case, "model", None), "model")
    sv: Serving = section(Serving, getattr(case, "serving", None), "serving")
    fab = fabric_for(hw)
    tp = sv.tp or min(hw.gpus // sv.pp, hw.domain)
    if hw.gpus % (tp * sv.pp):
        raise Unsupported(f"serving: tp x pp = {tp * sv.pp} does not divide hardware.gpus ({hw.gpus})")
    why = layout_problems(spec, tp=tp, pp=sv.pp)
    if why:
        raise Unsupported(f"serving: {why[0]}")
    kv = sv.kv_precision or (sv.precision if sv.precision in KV_BYTES else "bf16")
    rep = Replica(spec, fab, tp, sv.pp, Quant(sv.precision, kv), calibrated)
    return rep, sv, hw.gpus // (tp * sv.pp)


def predict_batch(rep: Replica, batch: int, input_tokens: int, output_tokens: int) -> dict[str, float]:
    prefill = prefill_time(rep, batch, input_tokens).total
    steps = output_tokens - 1
    step = decode_step_time(rep, batch, input_tokens + 1 + max(0, steps - 1) / 2).total if steps else 0.0
    latency = prefill + steps * step
    return {"latency_s": latency, "ttft_s": prefill, "tpot_s": step}


@predictors.register("inference")
def predict_inference(case: Case) -> dict[str, float]:
    rep, sv, replicas = replica_for(case)
    per_replica = math.ceil(sv.batch / replicas)
    mem = replica_memory(rep.spec, rep.gpu, rep.quant, rep.tp, rep.pp, sv.input_tokens + sv.output_tokens)
    out = predict_batch(rep, per_replica, sv.input_tokens, sv.output_tokens)
    tps = sv.batch * sv.output_tokens / out["latency_s"]
    out.update(tokens_per_s=tps, tokens_per_s_per_gpu=tps / (replicas * rep.gpus),
               _fits=float(mem.max_sequences >= per_replica))
    return out
