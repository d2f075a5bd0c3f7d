"""Continuous batching under Poisson arrivals: throughput, TTFT and TPOT (p50, p99).

The engine runs iterations (Yu et al. 2022, Orca: iteration-level scheduling; Kwon et
al. 2023, vLLM): each iteration gives one token to every running sequence (a decode step
at batch n) and runs the prefill of the prompts admitted since the last one (their first
output token). A mixed iteration is counted as the sum of its decode step and its
prefill, an upper bound (a fused batch reads the weights once).

Steady state at arrival rate lambda, for requests of S prompt tokens and O output tokens
(D = O - 1 decode tokens each), solves for the mean iteration time T:

    T = t_decode(n) + t_prefill(k),   k = lambda x T prompts per iteration,
                                      n = lambda x D x T running sequences (Little's law)

(bisection; no solution before the prompts per iteration exceed the token budget means
the rate is beyond the replica's capacity). Then:
- TPOT: a running sequence gets one token per iteration: mean T. Its per-request average
  over D tokens fluctuates with the prompts that land in its iterations (Poisson, k per
  iteration) and with the batch (M/G/inf occupancy: Poisson with mean n); p50 and p99
  take the normal quantiles z = 0 and 2.33 of both, the prefill term for a short request
  (the 5th-percentile output length), whose few tokens average over few iterations.
- TTFT: the wait for the running iteration to end, plus the iteration that holds the
  prompt: a decode step and the prefill of this prompt (its length distribution) and of
  the others that arrive during the running iteration; none of it when the engine is idle.
  Iterations differ by the prompts they prefill, and a long one gathers more prompts for
  the next: the prompts waiting at each iteration are a Markov chain (an iteration
  prefills what the token budget admits; the arrivals during it, Poisson with mean
  lambda (t_decode + t_prefill(j)), join those left over), and an arrival lands in a state
  in proportion to its stationary share times its length (_arrival_iteration), waits the
  rest of it and any full iterations ahead of it, and is prefilled with its batch
  (benchmarks/serving_queue_check.py: p99 within 4% of the discrete-event run, median
  over 30 points), plus the wait for a free sequence
  slot when the batch is full (Erlang C over max_batch slots, each held (D + 1) x T;
  exponential tail); prefill-only traffic (one output token) instead queues for compute:
  Kingman's wait with one prompt's service time at full batches. The parts are taken as
  independent; their distributions are convolved and p50/p99 read off the sum.
An iteration prefills at most PREFILL_TOKEN_BUDGET prompt tokens; more arrivals per
iteration than that admits on average is beyond capacity (bursts above it wait, above). The engine is busy with probability
1 - exp(-lambda (D + 1) T) (M/G/inf occupancy), which scales the p50 residual.
The discrete-event run in batcher_sim.py checks these formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

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
                    kmax: float) -> Callable[[float], float]:
    """T -> t_decode(lam D T) + t_prefill(lam T), the iteration time at a guessed T, as `analyze`
    states it, with StepModel's tables read inline: the bisection calls it some 60 times per
    rate. Batches beyond the first table block go through `dec` and `pre`."""
    dtab, ptab = tables
    nd, np_ = len(dtab), len(ptab)
    lam_d, floor = lam * D, math.floor

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
        lo = floor(k)
        if lo == 0:
            return td + k * ptab[1]
        if lo + 1 < np_:
            t_lo = ptab[lo]
            return td + (t_lo if lo == k else t_lo + (ptab[lo + 1] - t_lo) * (k - lo))
        return td + pre(k)
    return f


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
    if isinstance(step, StepModel):
        f = _iteration_time(step.first_blocks(ctx, S), dec, pre, lam, D, float(max_batch), kmax)
    else:
        top_n, lam_d = float(max_batch), lam * D

        def f(T: float) -> float:
            n = min(lam_d * T, top_n) if D else 0.0
            k = lam * T
            return dec(n) + pre(min(max(k, 1.0) if D == 0 else k, kmax))

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
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            # Once the bracket stops changing it never changes again (f is deterministic).
            if f(mid) > mid:
                if mid == lo:
                    break
                lo = mid
            else:
                if mid == hi:
                    break
                hi = mid
    T = hi
    n = min(lam * D * T, float(max_batch)) if D else 0.0
    k = prompts(T)
    share = pre(k) / T if T > 0 else 0.0
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
    ttft50 = ttft99 = math.nan
    if latency and stable:
        ttft50, ttft99 = _ttft(step, traffic, max_batch, dec, pre, T, n, k, td, a, rho)
    tpot50 = tpot99 = None
    if D > 0:
        tpot50 = T
        n99 = min(float(max_batch), max(1.0, _poisson_q(n, 0.99)))
        # Short requests see the prefills of few iterations: their average fluctuates most;
        # the 5th-percentile output length stands for them.
        d_short = max(1.0, traffic.output.quantile(0.05) - 1)
        per_prompt = pre(max(k, 1.0)) / max(k, 1.0)
        burst = Z99 * per_prompt * math.sqrt(k / d_short) if k > 0 else 0.0
        tpot99 = T + (dec(n99) - td) + burst
    if not stable:
        ttft50 = ttft99 = math.inf
    return ServingPoint(lam, stable, T, n, max_batch, share, ttft50, ttft99, tpot50, tpot99, lam * O if stable else 0.0)


_LOG_FACTORIAL = np.array([math.lgamma(j + 1) for j in range(256)])


def _poisson_pmf(mean: float, js: np.ndarray) -> np.ndarray:
    return np.exp(js * math.log(max(mean, 1e-300)) - mean - _LOG_FACTORIAL[js])


# Prompts one iteration prefills that the arrival mixture tells apart (the token budget's kmax,
# at most this), and prompts waiting beyond them that it follows (the rest are folded in).
MAX_PROMPT_TYPES = 32
MAX_CARRIED = 48
# Below this chance that even the longest iteration gathers a full budget of prompts, the carry-over
# cannot move a p99 (an event of 1% probability): the chain and the TTFT skip it.
CARRY_NEGLIGIBLE = 1e-4


def _poisson_pmf_rows(means: np.ndarray, js: np.ndarray) -> np.ndarray:
    """Poisson pmfs, one row per mean."""
    return np.exp(js[None, :] * np.log(np.maximum(means, 1e-300))[:, None] - means[:, None]
                  - _LOG_FACTORIAL[js][None, :])


def _arrival_iteration(lam: float, td: float, pre: Callable[[float], float], kmax: float, busy: float,
                       deltas: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The part of a prompt's TTFT spent in the iteration it arrives during, in the full
    iterations it then waits behind, and in its own iteration beyond its own one-prompt prefill
    and decode step: (values, probabilities).

    An iteration starts with q prompts waiting and prefills j = min(q, K) of them (K: the token
    budget's prompts), taking L = td + pre(j), plus, with variable prompt lengths, one of its
    prompts' deviation from the mean-length prefill (`deltas`: bins and their weights). The prompts
    that arrive during it (Poisson with mean lam L) join the q - j left over: a Markov chain on
    (q, bin) whose stationary law is pi. An arrival lands in state s in proportion to pi_s L_s
    (long iterations catch more arrivals), a uniform share u of the way through. Ahead of it are
    the q - j left over and the a_b that arrived before it (Poisson, lam u L): it waits
    m = (q - j + a_b) // K full iterations (td + pre(K) each), then is prefilled with the prompts
    ahead of it in that batch and, where there is room, the a_a that arrived after it (Poisson,
    lam (1 - u) L). Without this a TTFT p99 read at the mean iteration missed the bursts in which
    one long prefill gathers the prompts of the next: 0.67x the discrete-event run's p99 for
    2,048-token prompts at 60% load, 0.48x for 4,096-token ones at 85%
    (benchmarks/serving_queue_check.py)."""
    K = int(max(1, min(kmax, MAX_PROMPT_TYPES)))
    dev, share = (np.zeros(1), np.ones(1)) if deltas is None else deltas
    B = len(dev)
    pres = np.array([0.0] + [pre(float(j)) for j in range(1, K + 2)])
    p1, full = pres[1], td + pres[K]
    longest = full + max(0.0, float(dev.max()))
    most = lam * longest
    spread = int(most + 6 * math.sqrt(most) + 6)
    # The chance that a full iteration gathers K prompts or more (the budget's carry-over),
    # over the length bins (the longest is rare).
    full_means = lam * np.maximum(full + dev, 1e-12)
    carry = float(share @ (1.0 - _poisson_pmf_rows(full_means, np.arange(K)).sum(axis=1))) if lam > 0 else 0.0
    # Waiting prompts the chain follows: what one iteration's arrivals reach, and past K only
    # where they can be carried over.
    Q = int(min(K + MAX_CARRIED, spread) if carry >= CARRY_NEGLIGIBLE else min(K, spread))
    qs = np.arange(Q + 1)
    j = np.minimum(qs, K)
    # Iteration length per state (q, bin): the bin's deviation only where something is prefilled.
    length = np.maximum(td + pres[j][:, None] + np.where(j[:, None] > 0, dev[None, :], 0.0), 1e-12)
    A = min(Q, spread)
    arr = np.arange(A + 1)
    mean = lam * length                                          # (Q+1, B)
    pa = np.exp(arr[None, None, :] * np.log(np.maximum(mean, 1e-300))[:, :, None] - mean[:, :, None]
                - _LOG_FACTORIAL[arr][None, None, :])
    pa[:, :, -1] = np.maximum(0.0, 1.0 - pa[:, :, :-1].sum(axis=2))           # A or more
    # Transition (q, b) -> (min(Q, q - j + a), b'), b' uniform.
    nxt = np.minimum(Q, (qs - j)[:, None] + arr[None, :])        # (Q+1, A+1)
    if carry < CARRY_NEGLIGIBLE:
        to_q = pa                                                # nothing carried: q' = a (A = Q)
    else:
        to_q = np.zeros((Q + 1, B, Q + 1))
        np.add.at(to_q, (qs[:, None, None], np.arange(B)[None, :, None], nxt[:, None, :]), pa)
    trans = np.einsum("qbr,b->qr", to_q, share)                 # averaged over the bins
    # The bin is drawn afresh for each iteration, so it is independent of q: pi(q, b) = pi_q(q) w_b,
    # with pi_q the stationary law of the chain on q with its transitions averaged over the bins.
    n_states = (Q + 1) * B
    m = (trans - np.eye(Q + 1)).T
    m[-1] = 1.0
    rhs = np.zeros(Q + 1)
    rhs[-1] = 1.0
    try:
        pi_q = np.clip(np.linalg.solve(m, rhs), 0.0, None)
    except np.linalg.LinAlgError:
        pi_q = np.eye(Q + 1)[0]
    weight = (pi_q[:, None] * share[None, :] * length).ravel()
    weight = weight / weight.sum() if weight.sum() > 0 else np.eye(n_states)[0]
    keep = np.nonzero(weight > 1e-5)[0]
    if not keep.size:
        return np.zeros(1), np.ones(1)
    q_k = qs[keep // B]
    left_k = q_k - j[keep // B]                                  # prompts ahead carried over
    L_k = length.ravel()[keep]
    w_k = weight[keep]
    if carry < CARRY_NEGLIGIBLE:
        # No carry-over (CARRY_NEGLIGIBLE even for the longest iteration): every prompt that
        # arrives during an iteration is prefilled in the next, with all the others of that
        # iteration (Poisson, lam L, at most K - 1 of them): one draw, no before/after split.
        u = _U8 if B == 1 else _U4                               # fewer shares where bins multiply states
        others = pa[keep // B, keep % B]                          # (S, A+1)
        extra = pres[np.minimum(arr + 1, K)] - p1
        vals = (1 - u)[None, :, None] * L_k[:, None, None] + extra[None, None, :]
        probs = busy * w_k[:, None, None] / len(u) * others[:, None, :] * np.ones((1, len(u), 1))
        return np.concatenate([[0.0], vals.ravel()]), np.concatenate([[1.0 - busy], probs.ravel()])
    u = _U4                                                      # share of the iteration already run
    # Arrivals before it in its iteration: Poisson (lam u L), truncated at the chain's support.
    ab = np.exp(arr[None, None, :] * np.log(np.maximum(lam * u[None, :, None] * L_k[:, None, None], 1e-300))
                - lam * u[None, :, None] * L_k[:, None, None] - _LOG_FACTORIAL[arr][None, None, :])
    ab /= ab.sum(axis=2, keepdims=True)
    # In its batch (no full iteration to wait: left + a_b < K) the prompt is prefilled with
    # min(K - 1, left + a_b + a_a) others. a_b + a_a is the iteration's arrivals (Poisson, lam L)
    # and a_b, given their number t, is Binomial(t, u). Totals t with left + t <= K - 2 give
    # distinct batches (and a_b <= t is then inside the batch); all larger ones fill it (K - 1
    # others), with mass P(a_b <= K - 1 - left) - P(t <= K - 2 - left).
    ts = np.arange(K)
    pois = _poisson_pmf_rows(lam * L_k, ts)                       # (S, K)
    small = (left_k[:, None] + ts[None, :]) <= K - 2              # (S, K)
    cdf = np.concatenate([np.zeros(ab.shape[:2] + (1,)), np.cumsum(ab, axis=2)], axis=2)   # P(a_b < x)
    idx_s, idx_u = np.arange(len(L_k))[:, None], np.arange(len(u))[None, :]
    c = np.clip(K - left_k, 0, A + 1)                            # P(a_b <= K - 1 - left) = cdf[.., K - left]
    in_batch = cdf[idx_s, idx_u, c[:, None]]                     # (S, U)
    distinct = np.where(small, pois, 0.0)                        # (S, K): t small, a_b inside
    fill = np.clip(in_batch - distinct.sum(axis=1)[:, None], 0.0, None)
    resid = (1 - u)[None, :, None] * L_k[:, None, None]           # (S, U, 1)
    extra_t = pres[np.minimum(np.minimum(left_k[:, None] + ts[None, :], K - 1) + 1, K)] - p1   # (S, K)
    vals_now = np.concatenate([resid + extra_t[:, None, :], resid + (pres[K] - p1)], axis=2)
    probs_now = np.concatenate([np.broadcast_to(distinct[:, None, :], (len(L_k), len(u), K)),
                                fill[:, :, None]], axis=2)
    # Behind a full batch: w = (left + a_b) // K full iterations first, then a full batch.
    w_max = int((left_k.max() + A) // K)
    waits = np.arange(1, w_max + 1)
    if w_max:
        lo = np.clip(waits[None, :] * K - left_k[:, None], 0, A + 1)                          # (S, W)
        hi = np.clip((waits[None, :] + 1) * K - left_k[:, None], 0, A + 1)
        later = (cdf[idx_s[:, :, None], idx_u[:, :, None], hi[:, None, :]]
                 - cdf[idx_s[:, :, None], idx_u[:, :, None], lo[:, None, :]])                 # (S, U, W)
        vals_later = resid + waits[None, None, :] * full + (pres[K] - p1)
        vals_now = np.concatenate([vals_now, vals_later], axis=2)
        probs_now = np.concatenate([probs_now, np.clip(later, 0.0, None)], axis=2)
    probs = busy * w_k[:, None, None] / len(u) * probs_now
    return np.concatenate([[0.0], vals_now.ravel()]), np.concatenate([[1.0 - busy], probs.ravel()])


_U16 = np.linspace(0.0, 1.0, 17)[1:] - 1 / 32                      # 16 midpoints of (0, 1)
_U4 = (np.arange(4) + 0.5) / 4
_U8 = (np.arange(8) + 0.5) / 8
_U64 = (np.arange(64) + 0.5) / 64
_TAIL_BINS = (16, 16, 16, 8, 4, 2, 1, 1)                           # quantiles per bin, of 64


def _ttft(step: StepTimes, traffic: Traffic, max_batch: int, dec: Callable[[float], float],
          pre: Callable[[float], float], T: float, n: float, k: float, td: float, a: float,
          rho: float) -> tuple[float, float]:
    """TTFT p50 and p99 of a stable point (iteration T, n running, k prompts per iteration, decode
    step td, a = slot load in Erlang, rho = compute load of prefill-only traffic)."""
    lam, S = traffic.rate, traffic.input.mean
    D = max(1.0, traffic.output.mean) - 1
    kmax = _kmax(S)
    hold = (D + 1) * T
    # The engine idles when no request is in the system (M/G/inf: Poisson occupancy).
    busy = 1.0 - math.exp(-lam * (D + 1) * T)
    # A prompt's iteration includes a decode step only when sequences are running (Poisson n).
    td_first = td * (1.0 - math.exp(-n)) if D else 0.0
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
    others = min(lam * T, kmax)
    p1 = pre(1)

    def extra(j: float) -> float:
        return pre(1 + j) - p1

    if traffic.input.dist == "fixed":
        own = (np.array([p1]), np.ones(1))
    else:
        own = (np.array(step.prefills([traffic.input.quantile(q) for q in _U64])), np.full(64, 1 / 64))
    if D:
        # One prompt's prefill deviation from the mean-length prompt's, in 8 bins of the 64
        # quantiles, finer in the tail (the longest 1/64 of an exponential length is 5.2x its mean).
        deltas = None
        if len(own[0]) == 64:
            edges = np.cumsum([0, *_TAIL_BINS])
            deltas = (np.array([own[0][a:b].mean() for a, b in pairwise(edges)]) - p1,
                      np.array(_TAIL_BINS) / 64)
        busy_part = _arrival_iteration(lam, td, pre, kmax, busy, deltas)
    else:
        with_prefill = td_first + p1 + extra(_poisson_q(others, 0.5))
        u = _U16
        in_prefill = 1.0                # prefill-only traffic: every busy iteration is a prefill
        # Busy engine (probability `busy`): the residual of the running iteration, and the prompts
        # that arrive during it join this one's prefill. Idle engine: neither.
        r_vals = np.concatenate([u * with_prefill, u * td])
        r_prob = np.concatenate([np.full(16, in_prefill / 16), np.full(16, (1 - in_prefill) / 16)])
        top = int(min(kmax - 1, _poisson_q(others, 0.99) + 3 * math.sqrt(others) + 3))
        js = np.arange(top + 1)
        pj = _poisson_pmf(others, js)
        j_vals = np.array([extra(float(j)) for j in js])
        both = (r_vals[:, None] + j_vals[None, :]).ravel()
        both_p = (r_prob[:, None] * (pj / pj.sum())[None, :]).ravel()
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
