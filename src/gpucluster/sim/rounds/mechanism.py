"""Gavel's round mechanism: which jobs run on which GPU type this round.

priority[j, k] = X[j, k] / (time j received on k / time elapsed), both counted since the
allocation last changed; a job that has received nothing yet on a type it is allocated
gets X x 1e9 (Gavel: "so that 2 x allocation is preferred to allocation"). Every
(job, type) pair with X > 0 is taken in decreasing priority; a job runs on the first
type of its pairs whose remaining GPUs hold its whole gang, and at most once. Equal
priorities go to the job with the least service since it arrived (then the earliest),
so a reset of the counters does not always favour the same jobs.

`Pairs` holds what stays fixed between two allocations (the pairs with X > 0, as numpy
arrays and as Python lists): the array engine builds it once per allocation and runs
each round with a handful of numpy calls on the pairs and a Python loop over the winners
(`order` and `winners` inlined there, each winner's round applied as it is picked);
`assign` (the event simulator's entry point) builds it for one round. Both give the same
order and the same winners, bit for bit (tests/sim/test_gavel_exact.py).
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


class Pairs:
    """The (job, type) pairs with X > 0 of one allocation, in row-major (job, then type) order."""

    def __init__(self, X: np.ndarray, scale: np.ndarray) -> None:
        m, K = X.shape
        flat = X.ravel()
        self.pos = np.flatnonzero(flat > 0)
        self.job = self.pos // K
        self.type = self.pos % K
        self.x = flat[self.pos]
        self.neg_x_big = -(self.x * BIG)
        self.neg_x = -self.x
        self.jobs: list[int] = self.job.tolist()
        self.x_list: list[float] = self.x.tolist()
        self.types: list[int] = self.type.tolist()
        self.need: list[int] = scale[self.job].tolist()
        self.m = m
        self.smallest = int(scale.min()) if m else 0

    def __len__(self) -> int:
        return len(self.jobs)

    def order(self, received_s: np.ndarray, since_reset_s: float, service: np.ndarray,
              every_received: bool = False) -> list[int]:
        """Pair indices in decreasing priority, ties by less `service` (per pair), then pair order.
        `received_s` is per pair; `every_received`: the caller knows every pair's is > 0."""
        if since_reset_s <= 0:
            key = self.neg_x_big
        elif every_received:
            key = self.neg_x / (received_s / since_reset_s)
        else:
            frac = received_s / since_reset_s
            key = self.neg_x_big.copy()       # -(x / frac) is (-x) / frac, bit for bit
            np.divide(self.neg_x, frac, out=key, where=frac > 0)
        # lexsort is stable: equal (priority, service) keep pair order, which is by job
        return np.lexsort((service, key)).tolist()

    def winners(self, order: list[int], capacity: list[int]) -> tuple[list[int], list[int]]:
        """The pairs that run, in `order` (each job's first pair whose type still holds its gang),
        and the GPUs of each type left."""
        left = list(capacity)
        done = [False] * self.m
        # built here, not per allocation: the engine, which inlines this loop, has its own
        table, smallest = list(zip(self.jobs, self.types, self.need, strict=True)), self.smallest
        out: list[int] = []
        todo = self.m
        for i in order:
            j, k, n = table[i]
            if n > left[k] or done[j]:
                continue
            done[j] = True
            left[k] -= n
            out.append(i)
            todo -= 1
            if todo == 0 or (left[k] < smallest and max(left) < smallest):
                break
        return out, left


def assign(X: np.ndarray, received_s: np.ndarray, since_reset_s: float, scale: np.ndarray,
           capacity: np.ndarray, service: np.ndarray) -> np.ndarray:
    """Type index each job runs on this round (-1: none).

    `service` is each job's share of time run since it arrived (tie-breaker: less first).
    The priorities are those of `priorities`, computed on the pairs with X > 0 only."""
    p = Pairs(X, scale)
    got = np.full(p.m, -1, dtype=np.int64)
    if len(p) == 0:
        return got
    win, _ = p.winners(p.order(received_s.ravel()[p.pos], since_reset_s, service[p.job]), capacity.tolist())
    got[p.job[win]] = p.type[win]
    return got
