"""Predict `inference` validation cases: a static batch, or steady-state serving at a fixed
concurrency or request rate, on one replica type.

A case gives the hardware, the model and `serving:` (shared/validation/README.md; keys in
docs/serving.md):

    serving: {tp, pp, ep, precision, kv_precision, engine, input_tokens, output_tokens,
              batch | concurrency | request_rate, max_batch}

- `batch`: one static batch, as the sources' latency benchmarks run it (TensorRT-LLM's
  benchmarks/python/benchmark.py, vLLM's benchmark_latency.py): one prefill of all prompts, which
  emits the first output token, then output_tokens - 1 decode steps. Measured keys: latency_s,
  tokens_per_s (batch x output_tokens / latency), tokens_per_s_per_gpu, ttft_s, tpot_s.
- `concurrency` (closed loop: that many requests in flight, each replaced as it ends, as
  benchmark_serving --max-concurrency runs) or `request_rate` (Poisson arrivals, requests/s):
  continuous batching on each replica, predicted by the planner's queueing model
  (model/serving/queueing.analyze). Measured keys: output_tokens_per_s (all replicas),
  request_per_s, ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s.

`engine` (catalog/data/engines.yaml) selects the engine's kernels and host costs; a case that
does not state one gets the registry's default (docs/serving.md), never a guess from its notes.
When hardware.gpus holds several replicas (gpus = tp x pp x replicas), the batch (or the
concurrency, or the rate) is split evenly over them and they run side by side.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, field_validator, model_validator

from gpucluster.catalog.serving import engine_names
from gpucluster.errors import UserError
from gpucluster.model.serving.kv_cache import KV_BYTES, Quant, replica_memory
from gpucluster.model.serving.static_batch import DoesNotFit, static_batch
from gpucluster.model.serving.step_time import Replica, prefill_time
from gpucluster.model.transformer_params import layout_problems
from gpucluster.specs.validation_case import Case, Hardware
from gpucluster.specs.workload import TransformerSpec
from gpucluster.validate.predictors import Unsupported, fabric_for, predictors, section

STEADY_KEYS = ("output_tokens_per_s", "request_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


class Serving(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_tokens: PositiveInt
    output_tokens: PositiveInt
    batch: PositiveInt | None = None
    concurrency: PositiveInt | None = None
    request_rate: PositiveFloat | None = None
    max_batch: PositiveInt = 256
    tp: PositiveInt | None = None
    pp: PositiveInt = 1
    ep: PositiveInt = 1                 # expert parallelism inside the TP group (MoE)
    precision: Literal["bf16", "fp16", "fp8", "int8", "int4", "fp4"] = "bf16"
    kv_precision: Literal["bf16", "fp16", "fp8", "int8"] | None = None
    engine: str | None = None
    engine_version: str | None = None   # the engine's version: the registry's overrides for it apply

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str | None) -> str | None:
        if v is not None and v.strip().lower().partition("@")[0] not in engine_names():
            raise ValueError(f"unknown engine {v!r}; valid: {', '.join(engine_names())}")
        return v.strip().lower() if v is not None else None

    @model_validator(mode="after")
    def _one_mode(self) -> Serving:
        given = [k for k in ("batch", "concurrency", "request_rate") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of batch (static), concurrency or request_rate"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self


def replica_for(case: Case, calibrated: bool = True) -> tuple[Replica, Serving, int]:
    """The case's replica, its serving section and the number of replicas. (`calibrated` is kept
    for callers of the earlier API: no fitted factor remains, so it changes nothing.)"""
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
    try:
        engine = f"{sv.engine}@{sv.engine_version}" if sv.engine and sv.engine_version else sv.engine
        rep = Replica(spec, fab, tp, sv.pp, Quant(sv.precision, kv), engine, sv.ep)
        rep.kernels  # noqa: B018  # resolve the engine (and its version) now: a bad one is this case's error
    except UserError as exc:
        raise Unsupported(f"serving.engine_version: {exc.reason}") from None
    except ValueError as exc:
        raise Unsupported(f"serving.ep: {exc}") from None
    return rep, sv, hw.gpus // (tp * sv.pp)


def predict_steady(rep: Replica, sv: Serving, replicas: int) -> dict[str, float]:
    """Continuous batching on each replica at its share of the rate, or, for a fixed concurrency C,
    at the rate where Little's law holds: C = rate x (TTFT + (output - 1) x TPOT) (bisection)."""
    from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, analyze

    step = StepModel(rep)
    lengths = Lengths(float(sv.input_tokens)), Lengths(float(sv.output_tokens))
    D = sv.output_tokens - 1

    def at(rate: float):
        return analyze(step, Traffic(rate, *lengths), sv.max_batch)

    if sv.request_rate is not None:
        p = at(sv.request_rate / replicas)
    else:
        c = min(float(sv.concurrency) / replicas, float(sv.max_batch))  # type: ignore[arg-type]
        lo, hi = 0.0, c / max(1e-9, prefill_time(rep, 1, sv.input_tokens).total)
        p = None
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            q = at(mid)
            inflight = mid * (q.ttft_p50 + D * (q.tpot_p50 or 0.0)) if q.stable else math.inf
            if inflight > c:
                hi = mid
            else:
                lo, p = mid, q
        if p is None:
            p = at(lo)
    rate = p.rate * replicas
    return {"output_tokens_per_s": p.tokens_per_s * replicas, "request_per_s": rate,
            "ttft_p50_s": p.ttft_p50, "ttft_p99_s": p.ttft_p99,
            "tpot_p50_s": p.tpot_p50 or 0.0, "tpot_p99_s": p.tpot_p99 or 0.0}


@predictors.register("inference")
def predict_inference(case: Case) -> dict[str, float]:
    rep, sv, replicas = replica_for(case)
    if sv.batch is None:
        out = predict_steady(rep, sv, replicas)
        out["_fits"] = 1.0
        return out
    per_replica = math.ceil(sv.batch / replicas)
    # A static-batch benchmark's runtime sizes its KV cache for exactly the batch (TensorRT-LLM's
    # GptSession, gpt-fast's setup_caches) rather than taking an engine pool's 90% of HBM: the Llama 2
    # 70B batches of the TensorRT-LLM H200 blog ran with 139 GB of weights and KV cache on 141 GB.
    # So a batch is split (static_batch) only when it exceeds the whole HBM beside the weights and
    # one forward's activations.
    mem = replace(replica_memory(rep.spec, rep.gpu, rep.quant, rep.tp, rep.pp, sv.input_tokens + sv.output_tokens),
                  usable=rep.gpu.hbm_bytes)
    try:
        out = static_batch(rep, mem, per_replica, sv.input_tokens, sv.output_tokens)
    except DoesNotFit as exc:
        raise Unsupported(f"serving: {exc}") from None
    tps = sv.batch * sv.output_tokens / out["latency_s"]
    out.update(tokens_per_s=tps, tokens_per_s_per_gpu=tps / (replicas * rep.gpus),
               _fits=float(mem.max_sequences >= per_replica), _waves=out.pop("waves"),
               _fit_sequences=float(mem.max_sequences))
    return out


def defaults_taken(case: Case, predicted: dict[str, float]) -> list[str]:
    """The documented defaults a serving case took, and what its batch did where it was larger than
    the KV cache (validate shows them beside its prediction)."""
    try:
        rep, sv, replicas = replica_for(case)
    except Unsupported:
        return []
    eng = rep.kernels.engine
    out = [] if sv.engine else [f"engine: {eng.name} (the default engine; docs/serving.md)"]
    if predicted.get("_waves", 1.0) > 1 and sv.batch is not None:
        how = ("runs in waves of the sequences that fit" if eng.kv_admission == "reserve" else
               "runs together until the cache is full, then the newest sequences are preempted and recomputed")
        out.append(f"batch {math.ceil(sv.batch / replicas)} per replica > the {predicted['_fit_sequences']:.0f} "
                   f"sequences of {sv.input_tokens + sv.output_tokens} tokens whose KV cache fits in HBM "
                   f"beside the weights: {eng.name} (kv_admission {eng.kv_admission}) {how}")
    return out
