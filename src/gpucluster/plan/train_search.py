"""Layout search: every valid layout of a training job, ranked by predicted step time.

Fields the user fixes are kept; the others are enumerated: tp (inside the NVLink
domain unless allowed across), cp, pp, dp (what is left), ep, micro batch and
interleave. For each of these, recompute and ZeRO are chosen as a person would:
the least recompute and the least sharding that fit in memory are fastest, so
the search tries them in that order and keeps every combination that fits.
Sequence parallelism is on whenever tp > 1 (same traffic as plain TP, less
memory) unless fixed off.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gpucluster.model.training import frameworks
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.layout import Layout, options_problems, shape_problems
from gpucluster.model.training.memory import Memory, MemoryTerms
from gpucluster.model.training.step import Estimate, estimate
from gpucluster.specs.workload import TransformerSpec

# Settings of the software stack: a user states them (or takes the documented defaults of
# Layout); the search never chooses them.
STACK = ("overlap_dp_comm", "overlap_tp_comm", "moe_overlap", "moe_dispatcher", "moe_fp8_dispatch", "moe_imbalance",
         "zero3_prefetch_params", "pp_embedding_layer", "pp_loss_layer", "framework", "attention_kernel",
         "shard_group", "stage_layers", "torch_compile", "fused_kernels")
SEARCHED = ("tp", "pp", "dp", "cp", "ep", "interleave", "micro_batch", "sequence_parallel", "recompute", "zero",
            "offload_optimizer")
MICRO_BATCHES = (1, 2, 4, 8)
MAX_INTERLEAVE = 24


@dataclass
class SearchResult:
    ranked: list[Estimate]                  # fitting layouts, fastest first (top k)
    considered: int = 0                     # layouts built and checked
    estimated: int = 0                      # layouts whose step time was computed
    rejected: Counter = field(default_factory=Counter)   # reason -> count
    smallest_misfit: Estimate | None = None  # the layout that came closest to fitting
    equivalent: int = 0                     # layouts left out of `ranked` as ties of a simpler one

    @property
    def best(self) -> Estimate | None:
        return self.ranked[0] if self.ranked else None


# The most GPUs (or layers, experts) the search factors: 1,000,000 nodes x 1,024 GPUs a node, the
# bounds of a cluster spec, rounded up to 2**30. Factoring is trial division by primes up to
# sqrt(n), at most ~32,768 steps here; unbounded, 2**63 took hours (issue 23 item 3).
MAX_FACTORED = 2**30


def _divisors(n: int) -> list[int]:
    return list(_divisors_of(n))


@cache
def _divisors_of(n: int) -> tuple[int, ...]:
    """The divisors of n (n <= MAX_FACTORED), ascending (none for n < 1: a fixed tp larger than the
    GPUs leaves 0); past the bound a UserError, checked before any division (a caller that skipped
    the boundary's check cannot hang the search)."""
    n = operator.index(n)           # an int, or a numpy integer from a caller
    if n < 1:
        return ()
    if n > MAX_FACTORED:
        from gpucluster.errors import UserError
        raise UserError(f"the layout search factors 1 to {MAX_FACTORED:,} GPUs, layers or experts, got "
                        f"{str(n)[:40]}", field="gpus")
    divisors = [1]
    rest, p = n, 2
    while p * p <= rest:                     # at most sqrt(n) steps, fewer as `rest` shrinks
        if rest % p == 0:
            power = 0
            while rest % p == 0:
                rest //= p
                power += 1
            divisors = [d * p**k for d in divisors for k in range(power + 1)]
        p += 1 if p == 2 else 2
    if rest > 1:
        divisors += [d * rest for d in divisors]
    return tuple(sorted(divisors))


def _options(name: str, fixed: dict[str, Any], default: list) -> list:
    return [fixed[name]] if name in fixed else default


def training_precision(gpu: Any) -> str:
    """The precision a run on this GPU trains in when none is asked for: bf16 where the GPU has it,
    else fp16 (V100, P100, T4); a GPU with neither (K80) is refused by train_plan.require_precision."""
    return "bf16" if "bf16" in gpu.peak_tflops or "fp16" not in gpu.peak_tflops else "fp16"


def search(spec: TransformerSpec, fabric: TrainingFabric, gpus: int, global_batch: int, *,
           fixed: dict[str, Any] | None = None, seq_len: int | None = None, top: int = 5,
           tp_across_domains: bool = False, precision: str | None = None,
           flash_attention: bool = True) -> SearchResult:
    fixed = dict(fixed or {})
    precision = precision or training_precision(fabric.gpu)
    s = seq_len or spec.seq_len
    result = SearchResult([])
    p = fixed.get("precision", precision)
    if p not in fabric.gpu.peak_tflops:   # nothing to rank (plan_training says why in one line)
        result.rejected[f"{fabric.gpu.name} has no {p}"] += 1
        return result
    fits: list[Estimate] = []
    fw = frameworks.get(fixed.get("framework", frameworks.DEFAULT_FRAMEWORK))
    hbm = fabric.gpu.hbm_bytes
    shared: dict[tuple, Any] = {}  # memory terms that several layouts share (MemoryTerms)
    stack_fixed = {k: fixed[k] for k in STACK if k in fixed and fixed[k] != "framework"}
    stack_fixed.setdefault("moe_dispatcher", fw.moe_dispatcher)    # the framework's MoE defaults
    stack_fixed.setdefault("moe_overlap", fw.moe_overlap)
    # What every layout of this search has; each one is this with its own dimensions (_with).
    template = Layout(global_batch=global_batch, precision=fixed.get("precision", precision),
                      flash_attention=fixed.get("flash_attention", flash_attention), **stack_fixed)
    # Megatron-Core's expert all-to-all overlap (what `generate` writes for moe_overlap dualpipe)
    # refuses full recompute and expert parallelism of 1 (TransformerConfig.__post_init__): such
    # layouts are not ranked; a pipeline without virtual stages is layout.dualpipe_problems' rule.
    a2a_overlap = template.moe_overlap == "dualpipe" and fw.megatron_core
    dualpipe = template.moe_overlap == "dualpipe" and fw.dualpipe
    options = (_options("offload_optimizer", fixed, [False, True]),
               _options("recompute", fixed, ["none", "selective"] if a2a_overlap else ["none", "selective", "full"]))
    tp_max = gpus if tp_across_domains else min(gpus, fabric.domain)
    for tp in _options("tp", fixed, [d for d in _divisors(gpus) if d <= tp_max]):
        for cp in _options("cp", fixed, [c for c in _divisors(gpus // tp) if c <= 16 and s % c == 0]):
            if gpus % (tp * cp):
                continue
            rest = gpus // (tp * cp)
            pps = [p for p in _divisors(rest) if p <= spec.layers and (p == 1 or fw.supports_pp)]
            for pp in _options("pp", fixed, pps):
                if rest % pp:
                    result.rejected["tp x cp x pp does not divide the GPUs"] += 1
                    continue
                dp = rest // pp
                if "dp" in fixed and fixed["dp"] != dp:
                    continue
                eps = [e for e in _divisors(spec.experts) if (dp * cp) % e == 0] if spec.is_moe else [1]
                for ep in _options("ep", fixed, eps):
                    for mb in _options("micro_batch", fixed, list(MICRO_BATCHES)):
                        if global_batch % (mb * dp):
                            result.rejected["global batch not divisible by micro batch x dp"] += 1
                            continue
                        # DualPipe (a framework running it by default) has no virtual stages.
                        choices = _interleaves(spec.layers, pp, global_batch // (mb * dp)) \
                            if not dualpipe else [(1, False)]
                        if "interleave" in fixed:
                            v = fixed["interleave"]
                            choices = [(v, v > 1 and spec.layers % (pp * v) != 0 and (spec.layers + 2) % (pp * v) == 0)]
                        for v, accounted in choices:
                            if a2a_overlap and ep == 1:
                                result.rejected["moe_overlap dualpipe: Megatron-Core overlaps the expert all-to-all "
                                                "only with ep > 1"] += 1
                                continue
                            # An EP group larger than dp x cp folds over the TP ranks (expert TP 1).
                            etp = fixed.get("etp", 0 if (dp * cp) % ep == 0 else 1)
                            base = _with(template, {
                                "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": etp, "interleave": v,
                                "micro_batch": mb, "sequence_parallel": fixed.get("sequence_parallel", tp > 1),
                                "pp_embedding_layer": accounted, "pp_loss_layer": accounted, **stack_fixed})
                            _try_memory_options(spec, base, fabric, fixed, s, hbm, gpus, result, fits, shared,
                                                options)
    # Equal step times: prefer the simpler layout (less context, pipeline and tensor parallelism).
    fits.sort(key=lambda e: (round(e.step_s, 9), e.layout.cp, e.layout.pp, e.layout.tp, e.layout.ep,
                             e.layout.interleave, e.layout.micro_batch))
    # Layouts the model cannot tell apart (the same step time to a microsecond: a micro batch or
    # an interleave that changes nothing the model sees) are one answer: keep the simplest.
    ranked: list[Estimate] = []
    for e in fits:
        if ranked and abs(e.step_s - ranked[-1].step_s) < 1e-6:
            result.equivalent += 1
            continue
        ranked.append(e)
        if len(ranked) == top:
            break
    result.ranked = ranked
    return result


def _interleaves(layers: int, pp: int, microbatches: int) -> list[tuple[int, bool]]:
    """(interleave, embedding and loss counted as pipeline layers) pairs worth trying: where the
    layers do not split evenly, Megatron-Core interleaves them with the embedding and the loss
    counted as layers (126 + 2 on pp 8)."""
    if pp == 1 or microbatches < pp:
        return [(1, False)]
    if layers % pp == 0:
        return [(1, False)] + [(v, False) for v in _divisors(layers // pp)[1:] if v <= MAX_INTERLEAVE]
    if (layers + 2) % pp == 0:
        return [(1, False)] + [(v, True) for v in _divisors((layers + 2) // pp)[1:] if v <= MAX_INTERLEAVE]
    return [(1, False)]


def _with(base: Layout, changes: dict[str, Any]) -> Layout:
    """`base.with_(**changes)` for the search's own field names, without dataclasses.replace
    re-running __init__ over all 24 fields (a fifth of the search's time): Layout is a plain
    frozen dataclass, no __post_init__ and no slots (tests/plan/test_train_search.py holds it so)."""
    lay = object.__new__(Layout)
    lay.__dict__.update(base.__dict__)
    lay.__dict__.update(changes)
    return lay


def _try_memory_options(spec: TransformerSpec, base: Layout, fabric: TrainingFabric, fixed: dict[str, Any],
                        s: int, hbm: float, gpus: int, result: SearchResult, fits: list[Estimate],
                        shared: dict[tuple, Any], options: tuple[list, list]) -> None:
    max_zero = frameworks.get(base.framework).max_zero
    zeros = [min(max_zero, 1) if base.dp * base.cp > 1 else 0]
    if base.pp == 1 and base.dp * base.cp > 1 and max_zero >= 3:
        zeros.append(3)
    offloads, recomputes = options  # _options of offload_optimizer and recompute, the same for every layout
    found = False
    shape_why = shape_problems(spec, base, gpus, s)  # the options change none of these
    # Weights and activations, computed once for every option below (and shared with other
    # layouts through `shared`); not made for a shape that is refused.
    terms = None if shape_why else MemoryTerms(spec, base, s, shared)
    for offload in offloads:
        if found:
            break  # offloading only when nothing else fits
        for zero in _options("zero", fixed, zeros):
            for rc in recomputes:
                result.considered += 1
                # = problems(spec, layout, gpus, s)[0], without making the layout
                why = shape_why or options_problems(zero, base.pp, rc, base.framework)
                if why or terms is None:
                    result.rejected[why[0]] += 1
                    break
                parts = terms.parts(zero, rc, offload)
                w, g, o, a, b = parts
                total = w + g + o + a + b  # = Memory.total, summed in the same order
                if not total <= hbm:      # = not Memory.fits
                    result.rejected["does not fit in HBM"] += 1
                    if result.smallest_misfit is None or total < result.smallest_misfit.memory.total:
                        result.smallest_misfit = estimate(spec, _option(base, fixed, zero, rc, offload), fabric,
                                                          seq_len=s, mem=Memory(*parts, hbm))
                    continue
                result.estimated += 1
                fits.append(estimate(spec, _option(base, fixed, zero, rc, offload), fabric, seq_len=s,
                                     mem=Memory(*parts, hbm)))
                found = True
                break  # more recompute only slows this (tp, pp, ..., zero) down


def _option(base: Layout, fixed: dict[str, Any], zero: int, rc: str, offload: bool) -> Layout:
    changes: dict[str, Any] = {"zero": zero, "recompute": rc, "offload_optimizer": offload}
    if fixed.get("overlap_dp_comm") == "framework":
        # The framework's default: ZeRO-3 / FSDP always prefetch and reduce asynchronously.
        changes["overlap_dp_comm"] = zero >= 3 or frameworks.get(base.framework).overlap_dp_comm
    return _with(base, changes)
