"""Gavel's round mechanism: which jobs run on which GPU type this round.

priority[j, k] = X[j, k] / (time j received on k / time elapsed), both counted since the
allocation last changed; a job that has received nothing yet on a type it is allocated
gets X x 1e9 (Gavel: "so that 2 x allocation is preferred to allocation"). Every
(job, type) pair with X > 0 is taken in decreasing priority; a job runs on the first
type of its pairs whose remaining GPUs hold its whole gang, and at most once. Equal
priorities go to the job with the least service since it arrived (then the earliest),
so a reset of the counters does not always favour the same jobs.
"""

from __future__ import annotations

import numpy as np

BIG = 1e9


def priorities(X: np.ndarray, received_s: np.ndarray, since_reset_s: float) -> np.ndarray:
    if since_reset_s <= 0:
        return np.where(X > 0, X * BIG, 0.0)
    frac = received_s / since_reset_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(X > 0, np.where(frac > 0, X / frac, X * BIG), 0.0)


def assign(X: np.ndarray, received_s: np.ndarray, since_reset_s: float, scale: np.ndarray,
           capacity: np.ndarray, service: np.ndarray) -> np.ndarray:
    """Type index each job runs on this round (-1: none).

    `service` is each job's share of time run since it arrived (tie-breaker: less first).
    The priorities are those of `priorities`, computed on the pairs with X > 0 only."""
    m, K = X.shape
    flatX = X.ravel()
    pos = np.flatnonzero(flatX > 0)
    if len(pos) == 0:
        return np.full(m, -1, dtype=np.int64)
    x = flatX[pos]
    if since_reset_s <= 0:
        pri = x * BIG
    else:
        frac = received_s.ravel()[pos] / since_reset_s
        pri = x * BIG
        got_time = frac > 0
        pri[got_time] = x[got_time] / frac[got_time]
    jobs = pos // K
    # ties on (priority, service) keep pos order, which is by job: lexsort is stable
    order = pos[np.lexsort((service[jobs], -pri))]
    left = capacity.tolist()
    got = [-1] * m
    smallest = int(scale.min())
    need = scale[order // K].tolist()
    for j, k, n in zip((order // K).tolist(), (order % K).tolist(), need, strict=True):
        if got[j] >= 0 or n > left[k]:
            continue
        got[j] = k
        left[k] -= n
        if left[k] < smallest and max(left) < smallest:
            break
    return np.array(got, dtype=np.int64)
