"""Step times of one replica over many batch sizes at once (numpy): the tables the queueing
model's bisections read instead of evaluating step_time.py once per batch size.

`decode_totals(rep, batches, context)[i]` is `decode_step_time(rep, batches[i], context).total`
and `prefill_totals(rep, batches, tokens)[i]` is `prefill_time(rep, batches[i], tokens[i]).total`:
the same formulas as step_time._stage, term by term and in the same order, on arrays. Only the
last bits can differ (numpy's hypot, power and the collective model's array path against their
scalar counterparts); tests/model/serving/test_serving_step_table.py holds the two equal to
1e-12 on a grid of replica shapes, batches and prompt lengths.

`StepModel` (the queueing model's GPU replica) keeps these tables in blocks of batch sizes per
replica shape, context and prompt length; a block is computed the first time a batch in it is
asked for, and kept for later searches over the same replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from gpucluster.model.collectives import predict_times_s
from gpucluster.model.serving.kv_cache import kv_bytes_per_token, kv_heads_per_gpu
from gpucluster.model.serving import fitted
from gpucluster.model.serving.kernels import AR_MEASURED_MAX_BYTES, KERNEL_S, Kernels, host_step_s
from gpucluster.model.serving.step_time import (ACT_BYTES, EW_KERNELS, TERMS, Replica, _elementwise_bytes, _layer_mix,
                                                attention_work, ep_imbalance)
from gpucluster.model.training.compute import GemmCurve
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.transformer_flops import layer_gemms
from gpucluster.model.transformer_params import stage_layer_counts
from gpucluster.specs.workload import filled

Terms = dict[str, np.ndarray]


def _gemm_s(curve: GemmCurve, m: np.ndarray, n: float, k: float, w_bytes: float, a_bytes: float,
            count: float | np.ndarray = 1.0, grouped: bool = False) -> np.ndarray:
    """step_time._gemm_s's time on arrays of m (and of count, for MoE experts)."""
    t_f = 2.0 * m * n * k / (curve.peak_tflops * 1e12 * curve.eff_max)
    t_b = (k * n * w_bytes + m * k * a_bytes + m * n * ACT_BYTES) / (curve.hbm_gbps * 1e9)
    t0 = curve.t0_s if grouped else count * curve.t0_s
    return count * np.hypot(t_f, t_b) + t0


def _collective_s(fabric: TrainingFabric, op: str, size_bytes: np.ndarray, size: int, stride: int) -> np.ndarray:
    """TrainingFabric.time_s on an array of sizes (0 for a group of one or no bytes)."""
    if size <= 1:
        return np.zeros_like(size_bytes)
    t = predict_times_s(op, size_bytes, fabric.group(size, stride))
    return np.where(size_bytes > 0, t, 0.0)


def _allreduce_s(rep: Replica, kn: Kernels, size_bytes: np.ndarray) -> np.ndarray:
    """Kernels.allreduce_s on an array of sizes: the measured all-reduce, else the fabric's."""
    fabric = _collective_s(rep.fabric, "all_reduce", size_bytes, rep.tp, 1)
    if kn.allreduce is None:
        return fabric
    measured = kn.allreduce[0] + size_bytes / kn.allreduce[1]
    return np.where(size_bytes > 0, np.where(size_bytes <= AR_MEASURED_MAX_BYTES, measured, fabric), 0.0)


def _hops_s(rep: Replica, size_bytes: np.ndarray) -> np.ndarray:
    """step_time._hop_s on an array of sizes: the fabric's send/recv, or where it has no finite
    answer, the NIC's (or scale-up link's) GB/s per GPU and 10 us of latency."""
    f = rep.fabric
    stride = rep.tp
    group = f.group(2, stride) if stride < f.domain else f.group(2, f.domain)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = predict_times_s("send_recv", size_bytes, group)
    t = np.where(size_bytes > 0, t, 0.0)
    bad = ~np.isfinite(t)
    if bad.any():
        gbps = f.nic_gbps_per_gpu or f.gpu.scale_up.bandwidth_gbps_per_direction.value
        t = np.where(bad, size_bytes / (gbps * 1e9) + 1e-5, t)
    return t


def _stage(rep: Replica, batch: np.ndarray, new_tokens: np.ndarray, context: float, layers: int,
           last: bool) -> Terms:
    """step_time._stage's terms on arrays: `batch` sequences (floats) each adding `new_tokens`
    tokens (ints, broadcast with batch) on top of `context` cached ones."""
    spec, tp, kn = rep.spec, rep.tp, rep.kernels
    curve, xcurve = kn.gemm, kn.expert
    wb, ab, xwb, xab = kn.weight_bytes, kn.act_bytes, kn.expert_weight_bytes, kn.expert_act_bytes
    hbm = kn.hbm_gbps * 1e9
    decode = context > 0
    att_t0, att_bw, att_rate = kn.decode_attention if decode else kn.prefill_attention
    tokens = batch * new_tokens
    kv_layer = kv_bytes_per_token(spec, rep.quant.kv) / spec.layers
    kv_layer_gpu = kv_layer * (kv_heads_per_gpu(spec, tp) / (1 if spec.attention == "mla" else filled(spec.kv_heads)))
    zero = np.zeros(np.shape(tokens))
    terms = {t: zero for t in TERMS}
    b_int = np.maximum(1, np.ceil(batch)).astype(np.int64)
    # A layer's GEMM shapes for one sequence of one token: every linear GEMM's m is its tokens
    # (b x s; the serving planner runs neither sequence nor context parallelism), n and k do not
    # depend on the batch.
    tokens_int = b_int * new_tokens
    launch = 0.0
    for moe, n in _layer_mix(spec, layers):
        if n <= 0:
            continue
        g_t: np.ndarray | float = 0.0
        ew_t: np.ndarray | float = 0.0
        kernels = EW_KERNELS + 1
        for g in layer_gemms(spec, 1, tp, seq_len=1, dense_layer=not moe, causal=True, ep=rep.ep, etp=tp // rep.ep):
            if g.kind == "attention":
                continue
            if g.name.startswith("expert_"):
                assigned = tokens * spec.experts_per_token
                touched = spec.experts * (1.0 - (1.0 - spec.experts_per_token / spec.experts) ** tokens) / rep.ep
                m = assigned / rep.ep * ep_imbalance(rep.ep, assigned) / touched
                t = _gemm_s(xcurve, m, g.n, g.k, xwb, xab, touched, True)
                count: np.ndarray | float = touched
                a = xab
                kernels += 1
            else:
                m = (tokens_int * g.m) * batch / b_int
                count = float(g.count)
                t = _gemm_s(curve, m, g.n, g.k, wb, ab, count, False)
                a = ab
                kernels += g.count
            g_t = g_t + t
            if a < ACT_BYTES:  # the input is cast to 8 bits first: read 2 bytes, write 1
                ew_t = ew_t + m * g.k * count * (ACT_BYTES + a) / hbm
        a_flops, a_bytes = attention_work(spec, tokens, tp, batch, context, new_tokens, kv_layer_gpu)
        a_t = np.hypot(a_flops / att_rate, a_bytes / att_bw) + att_t0
        ew_t = ew_t + _elementwise_bytes(spec, tokens, tp, moe) / hbm
        terms["gemm"] = terms["gemm"] + n * g_t
        terms["attention"] = terms["attention"] + n * a_t
        terms["elementwise"] = terms["elementwise"] + n * ew_t
        terms["overhead"] = terms["overhead"] + n * (fitted.DECODE_LAYER_S if decode else EW_KERNELS * KERNEL_S)
        launch += n * kernels * kn.launch_s if decode else 0.0
        terms["tp_comm"] = terms["tp_comm"] + n * 2 * _allreduce_s(rep, kn, tokens * spec.hidden * ACT_BYTES)
    if launch > 0:
        # step_time._stage: asynchronous launches cost only what they take beyond the device time
        device = sum(terms.values())
        terms["overhead"] = terms["overhead"] + np.maximum(0.0, launch - device)
    return _with_logits(rep, terms, batch) if last else terms


def _with_logits(rep: Replica, terms: Terms, batch: np.ndarray) -> Terms:
    """The last stage's terms from a middle stage's: the output layer for each sequence's last
    position, in 16 bits, and the vocab-parallel logits gathered for sampling."""
    spec, tp = rep.spec, rep.tp
    half = rep.kernels.half
    out = dict(terms)
    out["gemm"] = terms["gemm"] + _gemm_s(half, batch, spec.vocab / tp, spec.hidden, 2.0, ACT_BYTES)
    out["tp_comm"] = terms["tp_comm"] + _collective_s(rep.fabric, "all_gather", batch * spec.vocab * ACT_BYTES, tp, 1)
    return out


def _total(rep: Replica, terms: Terms, prefill: bool) -> np.ndarray:
    """step_time._finish, then StepTime.total: the engine's host work per step (and a prefill's
    fixed cost) added to the overhead, the terms summed in their order."""
    host = host_step_s(rep.kernels) + (fitted.PREFILL_FIXED_S if prefill else 0.0)
    out: np.ndarray | float = 0
    for name in TERMS:
        v = terms[name] * 1.0
        if name == "overhead":
            v = v + host
        out = out + v
    return np.asarray(out, dtype=float)


def decode_totals(rep: Replica, batches: np.ndarray, context: float) -> np.ndarray:
    """decode_step_time(rep, b, context).total for every b of `batches` (>= 1)."""
    batches = np.asarray(batches, dtype=float)
    layers = max(stage_layer_counts(rep.spec.layers, rep.pp))
    micro = np.where(batches >= rep.pp, rep.pp, 1) if rep.pp > 1 else np.ones_like(batches)
    per = batches / micro
    st = _stage(rep, per, np.ones(batches.shape, dtype=np.int64), context, layers, True)
    terms = {name: v * rep.pp for name, v in st.items()}
    if rep.pp > 1:
        terms["pp_comm"] = terms["pp_comm"] + rep.pp * _hops_s(rep, per * rep.spec.hidden * ACT_BYTES)
    return _total(rep, terms, False)


def prefill_totals(rep: Replica, batches: np.ndarray, tokens: np.ndarray | int) -> np.ndarray:
    """prefill_time(rep, b, s).total for every pair of `batches` (>= 1) and `tokens` (ints,
    broadcast together)."""
    b, s = np.broadcast_arrays(np.asarray(batches, dtype=float), np.asarray(tokens, dtype=np.int64))
    layers = max(stage_layer_counts(rep.spec.layers, rep.pp))
    if rep.pp == 1:
        st = _stage(rep, b, s, 0.0, layers, True)
        return _total(rep, {name: v * 1.0 for name, v in st.items()}, True)
    micro = np.minimum(b, rep.pp)
    mb = b / micro
    mid = _stage(rep, mb, s, 0.0, layers, False)
    last = _with_logits(rep, mid, mb)   # the same layers, then the output layer
    slots = micro + rep.pp - 1
    terms = {name: v * (slots - 1) + last[name] for name, v in mid.items()}
    terms["pp_comm"] = terms["pp_comm"] + (rep.pp - 1) * _hops_s(rep, mb * s * rep.spec.hidden * ACT_BYTES)
    return _total(rep, terms, True)


class StepModel:
    """A replica's step times as cheap lookups (batch rounded to whole sequences, context to
    64 tokens, prompt length to 16 tokens): tables over blocks of batch sizes, each block
    computed at once (decode_totals, prefill_totals) and kept per replica shape, so that later
    searches over the same replica (a sweep, the report, the simulation) reuse it."""

    def __init__(self, rep: Replica) -> None:
        self.rep = rep
        self._d: dict[tuple[int, int], tuple[float, ...]] = {}   # (context, block) -> decode totals
        self._p: dict[tuple[int, int], tuple[float, ...]] = {}   # (prompt tokens, block) -> prefill totals
        self._flat: dict[tuple[int, bool], tuple[float, ...]] = {}  # first blocks indexed from 1 (decode: True)

    def decode(self, n: float, ctx: float) -> float:
        if n <= 0:
            return 0.0
        lo, hi = max(1, math.floor(n)), max(1, math.ceil(n))
        c = max(64, round(ctx / 64) * 64)
        t_lo, t_hi = self._decode(lo, c), self._decode(hi, c)
        return t_lo + (t_hi - t_lo) * (n - lo) if hi > lo else t_lo

    def first_blocks(self, ctx: float, tokens: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The decode table at `ctx` and the prefill table at `tokens`, each indexed by batch from
        1 (index 0 unused), over their first block: what a bisection reads directly."""
        return self._flat_d(max(64, round(ctx / 64) * 64)), self._flat_p(max(16, round(tokens / 16) * 16))

    def _flat_d(self, c: int) -> tuple[float, ...]:
        tab = self._flat.get((c, True))
        if tab is None:
            tab = self._flat[(c, True)] = (math.nan, *self._block_d(c, 0))
        return tab

    def _flat_p(self, s: int) -> tuple[float, ...]:
        tab = self._flat.get((s, False))
        if tab is None:
            block = self._p.get((s, 0))
            if block is None:
                block = self._p[(s, 0)] = _prefill_block(self.rep, s, 0)
            tab = self._flat[(s, False)] = (math.nan, *block)
        return tab

    def decoder(self, ctx: float) -> Callable[[float], float]:
        """`decode(n, ctx)` as one function of n, for a bisection's many calls: the first
        block's table read directly, larger batches through `decode`."""
        tab = self._flat_d(max(64, round(ctx / 64) * 64))
        slow, floor = self.decode, math.floor

        def dec(n: float) -> float:
            if n <= 0:
                return 0.0
            lo = floor(n)
            if lo < 1:
                return tab[1]
            try:
                t_lo = tab[lo]
                return t_lo if lo == n else t_lo + (tab[lo + 1] - t_lo) * (n - lo)
            except IndexError:
                return slow(n, ctx)
        return dec

    def _block_d(self, c: int, b: int) -> tuple[float, ...]:
        tab = self._d.get((c, b))
        if tab is None:
            tab = self._d[(c, b)] = _decode_block(self.rep, c, b)
        return tab

    def _decode(self, n: int, c: int) -> float:
        b, i = divmod(n - 1, DECODE_BLOCK)
        return self._block_d(c, b)[i]

    def prefill(self, k: float, tokens: float) -> float:
        """Prefill of k prompts of `tokens` tokens each; k < 1 is the chance of one."""
        if k <= 0:
            return 0.0
        s = max(16, round(tokens / 16) * 16)
        lo, hi = math.floor(k), math.ceil(k)
        t_hi = self._prefill(hi, s)
        if lo == 0:
            return k * t_hi
        t_lo = self._prefill(lo, s)
        return t_lo + (t_hi - t_lo) * (k - lo)

    def prefills(self, tokens: list[float]) -> list[float]:
        """One prompt's prefill at each of these lengths (a length distribution's quantiles):
        the tables of the lengths not seen yet computed together."""
        ss = [max(16, round(t / 16) * 16) for t in tokens]
        missing = sorted({s for s in ss if (s, 0) not in self._p})
        if missing:
            for s, tab in zip(missing, _prefill_blocks(self.rep, tuple(missing)), strict=True):
                self._p[(s, 0)] = tab
        return [self._p[(s, 0)][0] for s in ss]

    def prefiller(self, tokens: float) -> Callable[[float], float]:
        """`prefill(k, tokens)` as one function of k (see `decoder`)."""
        tab = self._flat_p(max(16, round(tokens / 16) * 16))
        slow, floor = self.prefill, math.floor

        def pre(k: float) -> float:
            if k <= 0:
                return 0.0
            lo = floor(k)
            try:
                if lo == 0:
                    return k * tab[1]
                t_lo = tab[lo]
                return t_lo if lo == k else t_lo + (tab[lo + 1] - t_lo) * (k - lo)
            except IndexError:
                return slow(k, tokens)
        return pre

    def _prefill(self, k: int, s: int) -> float:
        b, i = divmod(k - 1, PREFILL_BLOCK)
        tab = self._p.get((s, b))
        if tab is None:
            tab = self._p[(s, b)] = _prefill_block(self.rep, s, b)
        return tab[i]


# Batch sizes per table block: a decode block holds the default max_batch (512) whole, a prefill
# block the prompts an 8,192-token iteration admits at 128 tokens each. The caches below hold at
# most about 30 MB of tables (1,024 decode blocks of 512 floats, the rest smaller).
DECODE_BLOCK = 512
PREFILL_BLOCK = 64


@lru_cache(maxsize=1024)
def _decode_block(rep: Replica, context: int, block: int) -> tuple[float, ...]:
    first = block * DECODE_BLOCK + 1
    return tuple(decode_totals(rep, np.arange(first, first + DECODE_BLOCK), context).tolist())


@lru_cache(maxsize=4096)
def _prefill_block(rep: Replica, tokens: int, block: int) -> tuple[float, ...]:
    first = block * PREFILL_BLOCK + 1
    return tuple(prefill_totals(rep, np.arange(first, first + PREFILL_BLOCK), tokens).tolist())


@lru_cache(maxsize=64)
def _prefill_blocks(rep: Replica, tokens: tuple[int, ...]) -> list[tuple[float, ...]]:
    """The first prefill block of each of these prompt lengths, in one array evaluation."""
    ks = np.arange(1, PREFILL_BLOCK + 1)[None, :]
    return [tuple(row) for row in prefill_totals(rep, ks, np.array(tokens, dtype=np.int64)[:, None]).tolist()]
