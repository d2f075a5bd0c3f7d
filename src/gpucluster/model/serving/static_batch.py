"""One static batch, as latency benchmarks run it (TensorRT-LLM's benchmarks/python/benchmark.py,
vLLM's benchmark_latency.py): one prefill of all prompts, then the decode steps, every sequence
ending at the same length.

A batch larger than the replica's KV cache cannot run as one. What it does instead is the
engine's admission rule (engines.yaml `kv_admission`):
- reserve: a request is scheduled only when the KV cache of its whole context (prompt + output)
  fits, so the batch runs in waves of as many sequences as fit, each wave a whole batch run;
- on_demand: every sequence starts and takes cache blocks as it grows; when the cache is full
  (at context c* = cache tokens / batch) the newest sequences are preempted, the survivors (as
  many as fit at full context) run to the end, and the preempted ones recompute their prefill
  of c* tokens and then finish (vLLM's preemption by recompute).
"""

from __future__ import annotations

import math

from gpucluster.model.serving.kv_cache import ReplicaMemory
from gpucluster.model.serving.step_time import Replica, decode_step_time, prefill_time


class DoesNotFit(ValueError):
    """Not one sequence's KV cache fits beside the weights."""


def predict_batch(rep: Replica, batch: int, input_tokens: int, output_tokens: int) -> dict[str, float]:
    """One static batch that fits. Where the engine's first token comes from a decode step after a
    context phase that only fills the KV cache (engines.yaml `first_token: decode_step`), the first
    token costs the prefill and one step, and every output token a step."""
    prefill = prefill_time(rep, batch, input_tokens).total
    first_step = rep.kernels.engine.first_token_step
    steps = output_tokens - (0 if first_step else 1)
    step = decode_step_time(rep, batch, input_tokens + 1 + max(0, steps - 1) / 2).total if steps else 0.0
    first = prefill + (decode_step_time(rep, batch, input_tokens).total if first_step else 0.0)
    return {"latency_s": prefill + steps * step, "ttft_s": first, "tpot_s": step}


def _fitting(mem: ReplicaMemory, context: int) -> int:
    return int(mem.kv_budget // (mem.kv_per_token * context)) if mem.kv_per_token > 0 else 1 << 30


def static_batch(rep: Replica, mem: ReplicaMemory, batch: int, input_tokens: int,
                 output_tokens: int) -> dict[str, float]:
    """Latency, TTFT and TPOT of a static batch of `batch` sequences on one replica whose memory is
    `mem`, in waves or with preemption where the batch is larger than the KV cache (module doc).
    `waves` is how many groups the batch ran in (1: at once)."""
    context = input_tokens + output_tokens
    fit = _fitting(mem, context)
    if fit < 1:
        raise DoesNotFit(f"one sequence of {context} tokens needs {mem.kv_per_token * context / 2**30:.1f} GiB of KV "
                         f"cache per GPU; {mem.kv_budget / 2**30:.1f} GiB is left beside the weights")
    if batch <= fit:
        return predict_batch(rep, batch, input_tokens, output_tokens) | {"waves": 1.0}
    cache_tokens = mem.kv_budget / mem.kv_per_token
    full_at = math.floor(cache_tokens / batch)      # context at which the whole batch fills the cache
    if rep.kernels.engine.kv_admission == "reserve" or full_at <= input_tokens:
        # Waves of `fit` (also an on-demand engine whose cache cannot hold every prompt plus one
        # token: it admits only what fits, as a reserving one does).
        wave = predict_batch(rep, fit, input_tokens, output_tokens)
        full, rest = divmod(batch, fit)
        latency = full * wave["latency_s"]
        if rest:
            latency += predict_batch(rep, rest, input_tokens, output_tokens)["latency_s"]
        return {"latency_s": latency, "ttft_s": wave["ttft_s"], "tpot_s": wave["tpot_s"],
                "waves": float(full + (1 if rest else 0))}
    together = full_at - input_tokens                 # tokens every sequence generates before the cache is full
    first = predict_batch(rep, batch, input_tokens, together)
    left = output_tokens - together
    survivors = decode_step_time(rep, fit, full_at + (left - 1) / 2).total * left
    preempted = static_batch(rep, mem, batch - fit, full_at, left)   # recompute the prefill, then finish
    return {"latency_s": first["latency_s"] + survivors + preempted["latency_s"], "ttft_s": first["ttft_s"],
            "tpot_s": first["tpot_s"], "waves": 1.0 + preempted["waves"]}
