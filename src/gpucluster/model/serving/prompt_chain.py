"""The prompts waiting at each iteration of a continuous batcher, as a Markov chain, and what it
gives the queueing model (queueing.py): the iteration a prompt arrives during and the ones it
waits behind (TTFT); and, in closed form, how the prefill work a running sequence shares its
iterations with varies and clusters (TPOT).

An iteration starts with q prompts waiting and prefills j = min(q, K) of them (K: the prompts the
token budget admits), taking L = t_decode + t_prefill(j), plus, with variable prompt lengths, one
of its prompts' deviation from the mean-length prefill (bins of the length distribution, drawn
afresh each iteration). The prompts that arrive during it (Poisson with mean lam L) join the
q - j left over. Long iterations gather more prompts for the next one, whose prefill is longer
still: the mean iteration misses these bursts (the discrete-event run of batcher_sim.py showed a
TTFT p99 of 0.67x its own for 2,048-token prompts at 60% load, 0.48x for 4,096-token ones at 85%,
and a TPOT p99 of 0.54x: benchmarks/serving_queue_check.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_LOG_FACTORIAL = np.array([math.lgamma(j + 1) for j in range(256)])
# Prompts one iteration prefills that the chain tells apart (the token budget's kmax, at most
# this), and prompts waiting beyond them that it follows (the rest are folded in).
MAX_PROMPT_TYPES = 32
MAX_CARRIED = 48
# Below this chance that a full iteration gathers a full budget of prompts, the carry-over cannot
# move a p99 (an event of 1% probability): the chain skips it.
CARRY_NEGLIGIBLE = 1e-4
_U4 = (np.arange(4) + 0.5) / 4
_U8 = (np.arange(8) + 0.5) / 8


def poisson_pmf(mean: float, js: np.ndarray) -> np.ndarray:
    return np.exp(js * math.log(max(mean, 1e-300)) - mean - _LOG_FACTORIAL[js])


def poisson_pmf_rows(means: np.ndarray, js: np.ndarray) -> np.ndarray:
    """Poisson pmfs, one row per mean."""
    return np.exp(js[None, :] * np.log(np.maximum(means, 1e-300))[:, None] - means[:, None]
                  - _LOG_FACTORIAL[js][None, :])


@dataclass(frozen=True)
class PromptChain:
    lam: float                 # prompts per second
    K: int                     # prompts one iteration prefills at most
    pres: np.ndarray           # t_prefill(j), j = 0 .. K + 1 (mean-length prompts)
    full: float                # a full iteration: t_decode + t_prefill(K)
    dev: np.ndarray            # one prompt's prefill deviation per length bin
    share: np.ndarray          # the bins' probabilities
    j: np.ndarray              # prompts prefilled per state q
    length: np.ndarray         # iteration length per (q, bin)
    arrivals: np.ndarray       # P(a arrivals | q, bin), a = 0 .. A (A or more last)
    pi_q: np.ndarray           # stationary law of q
    carry: float               # chance that a full iteration gathers K prompts or more


def carry_chance(lam: float, td: float, pre: Callable[[float], float], kmax: float,
                 deltas: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """The chance that a full iteration (K prompts) gathers K prompts or more for the next one:
    the budget's carry-over, over the length bins (the longest is rare)."""
    K = int(max(1, min(kmax, MAX_PROMPT_TYPES)))
    dev, share = (np.zeros(1), np.ones(1)) if deltas is None else deltas
    if lam <= 0:
        return 0.0
    full_means = lam * np.maximum(td + pre(float(K)) + dev, 1e-12)
    return float(share @ (1.0 - poisson_pmf_rows(full_means, np.arange(K)).sum(axis=1)))


def prefill_variance(lam: float, k: float, pre: Callable[[float], float],
                     deltas: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """The long-run variance per iteration of the prefill time in the iterations a running
    sequence sees (s^2: the sum over D iterations has variance D s^2), k prompts per iteration
    on average. With a prefill of c per prompt the prompts of the next iteration are Poisson with
    mean alpha + beta q (beta = lam c: the arrivals one more prompt's prefill lets in), an
    autoregressive count with mean k and lag-t correlation beta^t, whose sum has variance
    k / (1 - beta)^2 per iteration in prompts; each prompt adds its length's spread. c is the
    cost per prompt of a typical batch, pre(1 + k) / (1 + k). It holds where the budget carries
    prompts over too (the chain's own fundamental-matrix variance was no closer to the
    discrete-event run: benchmarks/serving_queue_check.py)."""
    if k <= 0:
        return 0.0
    c = pre(1.0 + k) / (1.0 + k)
    beta = min(lam * c, 0.95)
    spread = 0.0 if deltas is None else float(deltas[1] @ deltas[0] ** 2)
    return k * (c * c / (1.0 - beta) ** 2 + spread)


def prompt_chain(lam: float, td: float, pre: Callable[[float], float], kmax: float,
                 deltas: tuple[np.ndarray, np.ndarray] | None = None) -> PromptChain:
    """The chain at arrival rate `lam` (prompts/s), decode step `td` (0 without running
    sequences), prefill of j mean-length prompts `pre(j)`, K = kmax; `deltas`: (one prompt's
    prefill deviation per length bin, the bins' weights), None for fixed lengths."""
    K = int(max(1, min(kmax, MAX_PROMPT_TYPES)))
    dev, share = (np.zeros(1), np.ones(1)) if deltas is None else deltas
    B = len(dev)
    pres = np.array([0.0] + [pre(float(j)) for j in range(1, K + 2)])
    full = td + pres[K]
    most = lam * (full + max(0.0, float(dev.max())))
    spread = int(most + 6 * math.sqrt(most) + 6)
    carry = carry_chance(lam, td, pre, kmax, deltas)
    # Waiting prompts the chain follows: what one iteration's arrivals reach, and past K only
    # where they can be carried over.
    Q = int(min(K + MAX_CARRIED, spread) if carry >= CARRY_NEGLIGIBLE else min(K, spread))
    qs = np.arange(Q + 1)
    j = np.minimum(qs, K)
    # Iteration length per state (q, bin): the bin's deviation only where something is prefilled.
    length = np.maximum(td + pres[j][:, None] + np.where(j[:, None] > 0, dev[None, :], 0.0), 1e-12)
    A = min(Q, spread)
    arr = np.arange(A + 1)
    pa = poisson_pmf_rows((lam * length).ravel(), arr).reshape(Q + 1, B, A + 1)
    pa[:, :, -1] = np.maximum(0.0, 1.0 - pa[:, :, :-1].sum(axis=2))           # A or more
    if carry < CARRY_NEGLIGIBLE:
        to_q = pa                                                # nothing carried: q' = a (A = Q)
    else:
        nxt = np.minimum(Q, (qs - j)[:, None] + arr[None, :])    # (Q+1, A+1)
        to_q = np.zeros((Q + 1, B, Q + 1))
        np.add.at(to_q, (qs[:, None, None], np.arange(B)[None, :, None], nxt[:, None, :]), pa)
    trans = np.einsum("qbr,b->qr", to_q, share)                 # averaged over the bins
    # The bin is drawn afresh for each iteration, so it is independent of q: pi(q, b) = pi_q(q) w_b,
    # with pi_q the stationary law of the chain on q with its transitions averaged over the bins.
    m = (trans - np.eye(Q + 1)).T
    m[-1] = 1.0
    rhs = np.zeros(Q + 1)
    rhs[-1] = 1.0
    try:
        pi_q = np.clip(np.linalg.solve(m, rhs), 0.0, None)
    except np.linalg.LinAlgError:
        pi_q = np.eye(Q + 1)[0]
    pi_q = pi_q / pi_q.sum() if pi_q.sum() > 0 else np.eye(Q + 1)[0]
    return PromptChain(lam, K, pres, full, dev, share, j, length, pa, pi_q, carry)


def arrival_iteration(ch: PromptChain, busy: float) -> tuple[np.ndarray, np.ndarray]:
    """The part of a prompt's TTFT spent in the iteration it arrives during, in the full
    iterations it then waits behind, and in its own iteration beyond its own one-prompt prefill
    and decode step: (values, probabilities); with probability 1 - busy the engine is idle.

    An arrival lands in state s in proportion to pi_s L_s (long iterations catch more arrivals),
    a uniform share u of the way through. Ahead of it are the q - j left over and the a_b that
    arrived before it (Poisson, lam u L): it waits m = (q - j + a_b) // K full iterations, then is
    prefilled with the prompts ahead of it in that batch and, where there is room, the a_a that
    arrived after it (Poisson, lam (1 - u) L)."""
    K, pres, full, lam = ch.K, ch.pres, ch.full, ch.lam
    B = len(ch.dev)
    p1 = pres[1]
    weight = (ch.pi_q[:, None] * ch.share[None, :] * ch.length).ravel()
    weight = weight / weight.sum() if weight.sum() > 0 else np.eye(len(weight))[0]
    keep = np.nonzero(weight > 1e-5)[0]
    if not keep.size:
        return np.zeros(1), np.ones(1)
    A = ch.arrivals.shape[2] - 1
    arr = np.arange(A + 1)
    left_k = (np.arange(len(ch.j)) - ch.j)[keep // B]            # prompts ahead carried over
    L_k = ch.length.ravel()[keep]
    w_k = weight[keep]
    if ch.carry < CARRY_NEGLIGIBLE:
        # No carry-over: every prompt that arrives during an iteration is prefilled in the next,
        # with all the others of that iteration (Poisson, lam L, at most K - 1 of them).
        u = _U8 if B == 1 else _U4                               # fewer shares where bins multiply states
        others = ch.arrivals[keep // B, keep % B]                # (S, A+1)
        extra = pres[np.minimum(arr + 1, K)] - p1
        vals = (1 - u)[None, :, None] * L_k[:, None, None] + extra[None, None, :]
        probs = busy * w_k[:, None, None] / len(u) * others[:, None, :] * np.ones((1, len(u), 1))
        return np.concatenate([[0.0], vals.ravel()]), np.concatenate([[1.0 - busy], probs.ravel()])
    u = _U4                                                      # share of the iteration already run
    # Arrivals before it in its iteration: Poisson (lam u L), truncated at the chain's support.
    ab = poisson_pmf_rows((lam * L_k[:, None] * u[None, :]).ravel(), arr).reshape(len(L_k), len(u), A + 1)
    ab /= ab.sum(axis=2, keepdims=True)
    # In its batch (no full iteration to wait: left + a_b < K) the prompt is prefilled with
    # min(K - 1, left + a_b + a_a) others. a_b + a_a is the iteration's arrivals (Poisson, lam L)
    # and a_b, given their number t, is Binomial(t, u). Totals t with left + t <= K - 2 give
    # distinct batches (and a_b <= t is then inside the batch); all larger ones fill it (K - 1
    # others), with mass P(a_b <= K - 1 - left) - P(t <= K - 2 - left).
    ts = np.arange(K)
    pois = poisson_pmf_rows(lam * L_k, ts)                       # (S, K)
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
