"""Continuous batching under Poisson arrivals: throughput, TTFT and TPOT (p50, p99).

The engine runs iterations (Yu et al. 2022, Orca: iteration-level scheduling; Kwon et
al. 2023, vLLM): each iteration gives one token to every running sequence (a decode step
at batch n) and runs the prefill of the prompts admitted since the last one (their first
output token). A mixed iteration is counted as the sum of its decode step and its
prefill, an upper bound (a fused batch reads the weights once).

Steady state at arrival rate lambda, for requests of S prompt tokens and O output tokens
(D = O - 1 decode tokens each), solves for the mean iteration time T:

    T = t_decode(n) + E[t_prefill(j)],   j Poisson with mean k = lambda x T prompts,
                                         n = lambda x D x T running sequences (Little's law)

(bisection; E over the Poisson prompts per iteration: _poisson_prefill; no solution before
the prompts per iteration exceed the token budget means the rate is beyond the replica's
capacity). Then:
- TPOT: a running sequence gets one token per iteration: mean T. Its per-request average
  over d tokens fluctuates with the prefills in its iterations, which cluster (a long
  prefill lets in the prompts of the next: prompt_chain.prefill_variance), and with the
  batch (M/G/inf occupancy: Poisson with mean n); the p99 is that of the mixture over
  the requests' output lengths, plus the batch's 99th-percentile decode step.
- TTFT: the wait for the running iteration to end, plus the iteration that holds the
  prompt: a decode step and the prefill of this prompt (its length distribution) and of
  the others that arrive during the running iteration; none of it when the engine is idle.
  Iterations differ by the prompts they prefill, and a long one gathers more prompts for
  the next: the prompts waiting at each iteration are a Markov chain (an iteration
  prefills what the token budget admits; the arrivals during it, Poisson with mean
  lambda (t_decode + t_prefill(j)), join those left over), and an arrival lands in a state
  in proportion to its stationary share times its length (prompt_chain.py), waits the
  rest of it and any full iterations ahead of it, and is prefilled with its batch
  (benchmarks/serving_queue_check.py: p99 within 4% of the discrete-event run, median
  over 30 points), plus the wait for a free sequence
  slot when the batch is full (Erlang C over max_batch slots, each held (D + 1) x T;
  exponential tail); prefill-only traffic (one output token) instead queues for compute:
  Kingman's wait with one prompt's service time at full batches. The parts are taken as
  independent; their distributions are convolved and p50/p99 read off the sum.
An iteration prefills at most PREFILL_TOKEN_BUDGET prompt tokens; more arrivals per
iteration than that admits on average is beyond capacity (bursts above it wait, above).
The engine is busy with probability 1 - exp(-lambda (D + 1) T) (M/G/inf occupancy).
The discrete-event run in batcher_sim.py checks these formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from gpucluster.model.serving.prompt_chain import (PromptChain, arrival_iteration, poisson_pmf, prefill_variance,
                                                   prompt_chain)
from gpucluster.model.serving.step_table import StepModel as StepModel  # the GPU replica's StepTimes

Z99 = 2.326
# Prompt tokens one iteration prefills at most: vLLM's max_num_batched_tokens and
# TensorRT-LLM's max_num_tokens default to 8192.
PREFILL_TOKEN_BUDGET = 8192
Dist = Literal["fixed", "uniform", "exponential"]


@dataclass(frozen=True)
class Lengths:
    """A token-length distribution: fixed, uniform on [mean/2, 3 mean/2], or exponential
    (at least 1 token)."""
    mean: float
    dist: Dist = "fixed"

    def quantile(self, q: float) -> float:
        if self.dist == "uniform":
            return self.mean * (0.5 + q)
        if self.dist == "exponential":
            return max(1.0, -self.mean * math.log(1 - q))
        return self.mean

    @property
    def cv2(self) -> float:
        return {"fixed": 0.0, "uniform": 1 / 12, "exponential": 1.0}[self.dist]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.dist == "uniform":
            x = rng.uniform(0.5 * self.mean, 1.5 * self.mean, n)
        elif self.dist == "exponential":
            x = rng.exponential(self.mean, n)
        else:
            x = np.full(n, self.mean)
        return np.maximum(1, np.rint(x)).astype(int)


@dataclass(frozen=True)
class Traffic:
    rate: float              # requests per second (Poisson)
    input: Lengths
    output: Lengths


class StepTimes(Protocol):
    """What the queueing model needs of a replica: its prefill and decode step times (a GPU
    replica's StepModel, or a CPU node's CpuStepModel)."""

    def prefill(self, k: float, tokens: float) -> float: ...

    def decode(self, n: float, ctx: float) -> float: ...

    def prefills(self, tokens: list[float]) -> list[float]: ...

    def decoder(self, ctx: float) -> Callable[[float], float]: ...

    def prefiller(self, tokens: float) -> Callable[[float], float]: ...

    def __hash__(self) -> int: ...                 # by identity: per-replica results are cached


@dataclass
class ServingPoint:
    rate: float                  # requests/s offered to this replica
    stable: bool                 # the replica keeps up (n fits, the fixed point exists)
    iteration_s: float           # mean iteration time T
    batch: float                 # mean running sequences n
    max_batch: int
    prefill_share: float         # fraction of time spent in prefill
    ttft_p50: float
    ttft_p99: float
    tpot_p50: float | None       # None when requests have a single output token
    tpot_p99: float | None
    tokens_per_s: float          # output tokens per second

    @property
    def occupancy(self) -> float:
        return self.batch / self.max_batch if self.max_batch else 0.0


def _poisson_q(mean: float, q: float) -> float:
    """The q-quantile of a Poisson count (exact for small means, normal beyond 50)."""
    if mean <= 0:
        return 0.0
    if mean > 50:
        return mean + {0.5: 0.0, 0.99: Z99}[q] * math.sqrt(mean)
    j, term = 0, math.exp(-mean)
    cdf = term
    while cdf < q:
        j += 1
        term *= mean / j
        cdf += term
    return float(j)


def _erlang_c(c: int, a: float) -> float:
    """Probability of waiting in M/M/c with offered load a (Erlang), a < c (stable recursion)."""
    if a <= 0:
        return 0.0
    b = 1.0
    for i in range(1, c + 1):
        b = a * b / (i + a * b)
    rho = a / c
    return b / (1 - rho + rho * b)


def _sum_quantiles(parts: list[tuple[np.ndarray, np.ndarray]], qs: tuple[float, ...]) -> list[float]:
    """Quantiles of a sum of independent discrete variables (values, probabilities): their
    probabilities binned on a common 512-step grid and convolved (FFT)."""
    hi = sum(float(v.max()) for v, _ in parts)
    if hi <= 0:
        return [0.0 for _ in qs]
    dt = hi / 511
    size = 1
    for v, _ in parts:
        size += round(float(v.max()) / dt) + 1
    nfft = 1 << (size - 1).bit_length()
    spec = np.ones(nfft // 2 + 1, dtype=complex)
    for v, p in parts:
        h = np.bincount(np.rint(v / dt).astype(int), weights=p, minlength=1)
        spec *= np.fft.rfft(h, nfft)
    pmf = np.clip(np.fft.irfft(spec, nfft)[:size], 0.0, None)
    cdf = np.cumsum(pmf) / pmf.sum()
    return [float(np.searchsorted(cdf, q)) * dt for q in qs]


def _kmax(S: float) -> float:
    """Prompts one iteration can prefill under the token budget (at least one)."""
    return max(1.0, float(PREFILL_TOKEN_BUDGET // max(1, int(S))))


def _iteration_time(tables: tuple[tuple[float, ...], tuple[float, ...]], dec: Callable[[float], float],
                    pre: Callable[[float], float], lam: float, D: float, top_n: float,
                    kmax: float, fixed: float) -> Callable[[float], float]:
    """T -> t_decode(lam D T) + t_prefill(lam T), the iteration time at a guessed T, as `analyze`
    states it, with StepModel's tables read inline: the bisection calls it some 60 times per
    rate. Batches beyond the first table block go through `dec` and `pre`."""
    dtab, ptab = tables
    nd, np_ = len(dtab), len(ptab)
    lam_d, floor, exp = lam * D, math.floor, math.exp

    def f(T: float) -> float:
        td = 0.0
        if D:
            n = lam_d * T
            if top_n < n:
                n = top_n
            if n > 0:
                lo = floor(n)
                if lo < 1:
                    td = dtab[1]
                elif lo + 1 < nd:
                    t_lo = dtab[lo]
                    td = t_lo if lo == n else t_lo + (dtab[lo + 1] - t_lo) * (n - lo)
                else:
                    td = dec(n)
        k = lam * T
        if D == 0 and 1.0 > k:
            k = 1.0
        if kmax < k:
            k = kmax
        if k <= 0:
            return td + 0.0
        # Poisson prompts per iteration: E[t_prefill(j)] is below t_prefill(k) by the fixed cost
        # of the iterations without a prompt (see _poisson_prefill).
        saving = fixed * (k - 1.0 + exp(-k) if k <= 1.0 else exp(-k)) if fixed else 0.0
        lo = floor(k)
        if lo == 0:
            return td + k * ptab[1] - saving
        if lo + 1 < np_:
            t_lo = ptab[lo]
            return td + (t_lo if lo == k else t_lo + (ptab[lo + 1] - t_lo) * (k - lo)) - saving
        return td + pre(k) - saving
    return f


def _prefill_fixed(pre: Callable[[float], float]) -> float:
    """The fixed cost of a prefill iteration, whatever its prompts: the intercept of the line
    through t_prefill(1) and t_prefill(2) (admission, launches, one read of the weights)."""
    return max(0.0, 2.0 * pre(1.0) - pre(2.0))


def _poisson_prefill(pre: Callable[[float], float], k: float, fixed: float) -> float:
    """The mean prefill time per iteration when the prompts per iteration are Poisson with mean
    k: t_prefill interpolates linearly between whole prompts and charges a fraction k < 1 of one
    prompt's fixed cost, where Poisson prompts leave a share e^-k of the iterations without any
    (E[t(j)] = fixed (1 - e^-k) + marginal k for an affine t): the difference is
    fixed (k - 1 + e^-k) below one prompt, fixed e^-k above."""
    if k <= 0:
        return 0.0
    saving = fixed * (k - 1.0 + math.exp(-k) if k <= 1.0 else math.exp(-k))
    return pre(k) - saving


def analyze(step: StepTimes, traffic: Traffic, max_batch: int, *, latency: bool = True) -> ServingPoint:
    """The steady state of one replica at `traffic.rate` (see the module docstring); without
    `latency`, TTFT is not computed (NaN): a search that checks only stability or TPOT skips it."""
    lam, S = traffic.rate, traffic.input.mean
    O = max(1.0, traffic.output.mean)
    D = O - 1
    ctx = S + 1 + D / 2
    kmax = _kmax(S)

    def prompts(T: float) -> float:
        # Without decode work an iteration exists only to prefill: at least one prompt.
        k = lam * T
        return min(max(k, 1.0) if D == 0 else k, kmax)

    dec, pre = step.decoder(ctx), step.prefiller(S)
    # With decode work the prompts per iteration are Poisson: E[t_prefill(j)] (_poisson_prefill).
    fixed = _prefill_fixed(pre) if D else 0.0
    if isinstance(step, StepModel):
        f = _iteration_time(step.first_blocks(ctx, S), dec, pre, lam, D, float(max_batch), kmax, fixed)
    else:
        top_n, lam_d = float(max_batch), lam * D

        def f(T: float) -> float:
            n = min(lam_d * T, top_n) if D else 0.0
            k = lam * T
            if D == 0:
                return dec(n) + pre(min(max(k, 1.0), kmax))
            return dec(n) + _poisson_prefill(pre, min(k, kmax), fixed)

    # Solve T = f(T) by bisection: f(T) - T > 0 at the smallest iteration; look for a T where
    # it turns negative before the budget caps the prompts per iteration (else: over capacity).
    lo = f(1e-12)
    cap = kmax / lam
    hi, stable = lo, False
    while hi <= cap * 1.0001:
        if f(hi) <= hi:
            stable = True
            break
        hi *= 1.5
    if stable and hi > lo:
        lo = hi / 1.5 if hi / 1.5 >= lo else lo
        # To 1e-10 of T (some 30 halvings; the step tables themselves hold 1e-3 or so).
        while hi - lo > 1e-10 * hi:
            mid = 0.5 * (lo + hi)
            if f(mid) > mid:
                lo = mid
            else:
                hi = mid
    T = hi
    n = min(lam * D * T, float(max_batch)) if D else 0.0
    k = prompts(T)
    share = (_poisson_prefill(pre, k, fixed) if D else pre(k)) / T if T > 0 else 0.0
    if not stable or share > 1:
        inf = math.inf
        return ServingPoint(lam, False, T, n, max_batch, min(share, 1.0), inf, inf,
                            inf if D else None, inf if D else None, 0.0)
    td = dec(n)
    # Slots: max_batch servers, each request holds one for (D + 1) iterations.
    hold = (D + 1) * T
    a = lam * hold
    if a >= max_batch:
        stable = False
    rho = 0.0
    if D == 0 and lam > 0:
        # Prefill-only traffic queues for compute (see _ttft): beyond its capacity, no steady state.
        rho = lam / saturated(step, traffic, max_batch).rate
        if rho >= 1:
            stable = False
    own = _own_prefills(step, traffic, pre)
    bins = _length_bins(step, traffic)
    # The prompts waiting per iteration as a Markov chain (prompt_chain.py): what TTFT needs.
    chain = prompt_chain(lam, td, pre, kmax, bins) if D > 0 and latency and stable else None
    ttft50 = ttft99 = math.nan
    if latency and stable:
        ttft50, ttft99 = _ttft(step, traffic, max_batch, pre, T, n, td, a, rho, own, chain)
    tpot50 = tpot99 = None
    if D > 0:
        tpot50 = T
        n99 = min(float(max_batch), max(1.0, _poisson_q(n, 0.99)))
        # The prefill time per iteration varies, and clusters (a long prefill lets in the prompts
        # of the next: prompt_chain.prefill_variance): over a request's d decode iterations its
        # mean has variance s^2 / d, so short requests fluctuate most. The p99 over requests is
        # that of the mixture over output lengths.
        burst = _mixture_p99(math.sqrt(prefill_variance(lam, k, pre, bins)), traffic.output)
        tpot99 = T + (dec(n99) - td) + burst
    if not stable:
        ttft50 = ttft99 = math.inf
    return ServingPoint(lam, stable, T, n, max_batch, share, ttft50, ttft99, tpot50, tpot99, lam * O if stable else 0.0)


_U16 = np.linspace(0.0, 1.0, 17)[1:] - 1 / 32                      # 16 midpoints of (0, 1)
_U64 = (np.arange(64) + 0.5) / 64
_TAIL_BINS = (16, 16, 16, 8, 4, 2, 1, 1)                           # quantiles per bin, of 64


def _mixture_p99(sd: float, output: Lengths) -> float:
    """The 99th percentile of a mean of d iid deviations of standard deviation `sd` (normal), d the
    decode steps of a request whose output length follows `output` (16 quantiles)."""
    if sd <= 0:
        return 0.0
    if output.dist == "fixed":
        return Z99 * sd / math.sqrt(max(1.0, output.mean - 1))
    root_d = _decode_steps(output)
    x = np.linspace(0.0, Z99 * sd / float(root_d.min()), 128)
    # P(mean deviation > x) over the mixture: the normal tail (Abramowitz-Stegun 26.2.17, |error|
    # < 7.5e-8) at x sqrt(d) / sd, averaged over the output quantiles.
    z = x[:, None] * root_d[None, :] / sd
    t = 1.0 / (1.0 + 0.2316419 * z)
    poly = t * (0.319381530 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429))))
    tail = (np.exp(-0.5 * z * z) * poly).sum(axis=1) / (len(root_d) * math.sqrt(2 * math.pi))
    return float(np.interp(-0.01, -tail, x))


def _own_prefills(step: StepTimes, traffic: Traffic, pre: Callable[[float], float]) -> tuple[np.ndarray, np.ndarray]:
    """One prompt's prefill time over its length distribution: (values, probabilities)."""
    if traffic.input.dist == "fixed":
        return np.array([pre(1)]), np.ones(1)
    return _quantile_prefills(step, traffic.input)[0], np.full(64, 1 / 64)


def _length_bins(step: StepTimes, traffic: Traffic) -> tuple[np.ndarray, np.ndarray] | None:
    """One prompt's prefill deviation from the mean-length prompt's, in 8 bins of the 64
    quantiles, finer in the tail (the longest 1/64 of an exponential length is 5.2x its mean);
    None for fixed lengths."""
    return None if traffic.input.dist == "fixed" else _quantile_prefills(step, traffic.input)[1]


@lru_cache(maxsize=64)
def _quantile_prefills(step: StepTimes, lengths: Lengths) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """One prompt's prefill at 64 quantiles of its length, and _length_bins (a search asks them
    at every rate of every replica shape)."""
    own = np.array(step.prefills([lengths.quantile(q) for q in _U64]))
    edges = np.cumsum([0, *_TAIL_BINS])
    dev = np.add.reduceat(own, edges[:-1]) / np.array(_TAIL_BINS) - step.prefill(1, lengths.mean)
    return own, (dev, np.array(_TAIL_BINS) / 64)


@lru_cache(maxsize=64)
def _decode_steps(output: Lengths) -> np.ndarray:
    """sqrt(d) at 16 quantiles of a request's decode steps d = output - 1 (at least 1)."""
    return np.sqrt(np.maximum(1.0, np.array([output.quantile(q) for q in _U16]) - 1))


def _ttft(step: StepTimes, traffic: Traffic, max_batch: int, pre: Callable[[float], float], T: float,
          n: float, td: float, a: float, rho: float, own: tuple[np.ndarray, np.ndarray],
          chain: PromptChain | None) -> tuple[float, float]:
    """TTFT p50 and p99 of a stable point (iteration T, n running, decode step td, a = slot load
    in Erlang, rho = compute load of prefill-only traffic, `own`: one prompt's prefill over its
    lengths, `chain`: the prompts waiting per iteration, None for prefill-only traffic)."""
    lam, S = traffic.rate, traffic.input.mean
    D = max(1.0, traffic.output.mean) - 1
    kmax = _kmax(S)
    hold = (D + 1) * T
    # The engine idles when no request is in the system (M/G/inf: Poisson occupancy).
    busy = 1.0 - math.exp(-lam * (D + 1) * T)
    pc = 0.0
    decay = 1.0
    if max_batch < 4096:
        pc = _erlang_c(max_batch, a)
        decay = (max_batch - a) / hold
    if D == 0 and lam > 0:
        # Prefill-only traffic queues for compute: Kingman's G/G/1 wait with the service time of
        # one prompt at full batches (1 / capacity), Poisson arrivals, exponential tail.
        wq = rho / (1 - rho) * (1 + traffic.input.cv2) / 2 * (1 / saturated(step, traffic, max_batch).rate)
        pc, decay = rho, rho / wq if wq > 0 else 1.0
    # TTFT = residual of the running iteration + decode step in the prompt's iteration + its own
    # prefill + the prefill of the others admitted with it + the wait for a slot (or compute):
    # independent parts, their distribution convolved, p50 and p99 read off the sum.
    if chain is not None:
        busy_part = arrival_iteration(chain, busy)
    else:
        # Prefill-only traffic: every busy iteration is a prefill; the prompts that arrive
        # during the running one join this one's prefill.
        others = min(lam * T, kmax)
        p1 = pre(1)
        with_prefill = pre(1 + _poisson_q(others, 0.5))
        u = _U16
        top = int(min(kmax - 1, _poisson_q(others, 0.99) + 3 * math.sqrt(others) + 3))
        js = np.arange(top + 1)
        pj = poisson_pmf(others, js)
        j_vals = np.array([pre(1.0 + j) - p1 for j in js])
        both = ((u * with_prefill)[:, None] + j_vals[None, :]).ravel()
        both_p = (np.full(16, 1 / 16)[:, None] * (pj / pj.sum())[None, :]).ravel()
        busy_part = (np.concatenate([[0.0], both]), np.concatenate([[1 - busy], busy * both_p]))
    decode = (np.array([0.0, td]), np.array([math.exp(-n), 1 - math.exp(-n)])) if D else (np.zeros(1), np.ones(1))
    u = _U16
    wait = (np.concatenate([[0.0], -np.log(1 - u) / decay]), np.concatenate([[1 - pc], np.full(16, pc / 16)]))
    t50, t99 = _sum_quantiles([busy_part, decode, own, wait], (0.5, 0.99))
    rep = getattr(step, "rep", None)
    if rep is not None and rep.kernels.engine.first_token_step:
        # The engine's context phase only fills the KV cache; the first token comes out of the
        # next iteration (engines.yaml first_token: decode_step).
        t50, t99 = t50 + T, t99 + T
    return t50, t99


def saturated(step: StepTimes, traffic: Traffic, batch: int) -> ServingPoint:
    """Throughput when `batch` sequences always run (a full continuous batch): the rate whose
    Little's-law occupancy is `batch`, without the slot queue."""
    S = traffic.input.mean
    O = max(1.0, traffic.output.mean)
    D = O - 1
    ctx = S + 1 + D / 2
    kmax = _kmax(S)
    if D == 0:
        k = min(float(batch), kmax)
        T = step.prefill(k, S)
        lam = k / T
        return ServingPoint(lam, True, T, 0.0, batch, 1.0, T, T, None, None, lam * O)
    # n sequences always running: each iteration admits n / D new prompts (Little's law),
    # at most the token budget's worth.
    k = min(batch / D, kmax)
    T = step.decode(batch, ctx) + step.prefill(k, S)
    lam = k / T
    share = step.prefill(k, S) / T
    return ServingPoint(lam, True, T, batch, batch, share, math.nan, math.nan, T, T, lam * O)


def max_rate(step: StepTimes, traffic: Traffic, max_batch: int, slo_ttft: float | None,
             slo_tpot: float | None, *, best_latency: bool = True) -> tuple[float, ServingPoint | None, str]:
    """The highest request rate one replica sustains within the SLOs, the point there, and
    what stops it going higher ("capacity", "TTFT SLO", "TPOT SLO"). The point's TTFT is NaN
    when `best_latency` is off and no TTFT SLO needed it (a caller that analyzes its own
    operating point saves the convolution)."""

    def ok(p: ServingPoint) -> str | None:
        if not p.stable:
            return "capacity"
        if slo_ttft is not None and p.ttft_p99 > slo_ttft:
            return "TTFT SLO"
        if slo_tpot is not None and p.tpot_p99 is not None and p.tpot_p99 > slo_tpot:
            return "TPOT SLO"
        return None

    def at(rate: float, latency: bool = True) -> ServingPoint:
        return analyze(step, Traffic(rate, traffic.input, traffic.output), max_batch, latency=latency)

    def bisect(lo: float, hi: float, low_point: ServingPoint, latency: bool,
               reason: str) -> tuple[float, ServingPoint, str]:
        best = low_point
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            p = at(mid, latency)
            why = ok(p) if latency else ok_without_ttft(p)
            if why is None:
                lo, best = mid, p
            else:
                hi, reason = mid, why
            if hi / lo < 1.005:
                break
        return lo, best, reason

    def ok_without_ttft(p: ServingPoint) -> str | None:
        if not p.stable:
            return "capacity"
        if slo_tpot is not None and p.tpot_p99 is not None and p.tpot_p99 > slo_tpot:
            return "TPOT SLO"
        return None

    # Capacity and TPOT first, without TTFT (a convolution per probe); then, only where a TTFT SLO
    # is given and broken at that rate, the highest rate below it that meets it too (TTFT p99
    # grows with the rate).
    sat = saturated(step, traffic, max_batch)
    hi = sat.rate * 1.05
    low = hi * 1e-4
    low_point = at(low, False)
    why = ok_without_ttft(low_point)
    if why is not None:
        return 0.0, at(low), why
    rate, best, reason = bisect(low, hi, low_point, False, "capacity")
    if slo_ttft is None:
        return rate, (at(rate) if best_latency else best), reason
    top = at(rate)
    if ok(top) is None:
        return rate, top, reason
    low_point = at(low)
    if ok(low_point) is not None:
        return 0.0, low_point, "TTFT SLO"
    return bisect(low, rate, low_point, True, "TTFT SLO")
