"""A trace run in rounds over numpy arrays (Gavel's simulator, without its Python objects).

Time starts at 0 and is cut into rounds of `round_s`. At each round's start the jobs that
arrived are admitted, the allocation is recomputed if the set of jobs changed, and the
mechanism picks who runs where. A job that runs on a type it did not hold in the previous
round (and has run before) first pays `switch_s` (checkpoint restore); a job that finishes
mid-round frees its GPUs only at the next round, as in Gavel. When the allocation is
integral and every allocated job runs (FIFO, an underloaded cluster), nothing can change
before the next arrival or completion, so those rounds are advanced in one step.

Utilization is Gavel's: GPU-seconds jobs held (switch time included) over GPUs x makespan,
makespan being the last completion (time 0 is the trace's origin).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpucluster.sim.rounds.allocation import Allocator, Problem
from gpucluster.sim.rounds.mechanism import assign


@dataclass
class RoundResult:
    end_s: np.ndarray          # completion time per job (nan: did not finish)
    arrival_s: np.ndarray
    scale: np.ndarray
    busy_gpu_s: float
    makespan_s: float
    gpus: int
    rounds: int
    solves: int
    switches: int
    busy_gpu_s_by_type: np.ndarray | None = None   # GPU-seconds held per type (cost per GPU type)

    @property
    def finished(self) -> np.ndarray:
        return ~np.isnan(self.end_s)

    @property
    def jct_s(self) -> np.ndarray:
        return (self.end_s - self.arrival_s)[self.finished]

    @property
    def utilization(self) -> float:
        return self.busy_gpu_s / (self.gpus * self.makespan_s) if self.makespan_s > 0 else 0.0


Check = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def run_rounds(arrival_s: np.ndarray, scale: np.ndarray, steps: np.ndarray, throughput: np.ndarray,
               capacity: np.ndarray, allocator: Allocator, *, round_s: float = 360.0, switch_s: float = 0.0,
               prices: np.ndarray | None = None, max_s: float = 3650 * 86400.0,
               check: Check | None = None) -> RoundResult:
    """Run jobs (arrival, GPUs, steps, steps/s per type) on `capacity` GPUs per type.

    `check(X, assignment, scale, capacity)` is called every round (tests' invariants)."""
    if round_s <= 0 or switch_s < 0 or switch_s >= round_s:
        raise ValueError("round_s > 0 and 0 <= switch_s < round_s")
    arr = np.asarray(arrival_s, dtype=float)
    sc = np.asarray(scale, dtype=np.int64)
    T = np.asarray(throughput, dtype=float)
    cap = np.asarray(capacity, dtype=np.int64)
    N, K = T.shape
    order = np.argsort(arr, kind="stable")
    rem = np.asarray(steps, dtype=float).copy()
    end = np.full(N, np.nan)
    service = np.zeros(N)
    prev = np.full(N, -1, dtype=np.int64)
    # a job no type can ever hold never runs (Gavel would wait forever): leave it out
    runnable = np.asarray(((T > 0) & (sc[:, None] <= cap[None, :])).any(axis=1))
    active: list[int] = []
    nxt, t, since = 0, 0.0, 0.0
    busy, rounds, solves, switches = 0.0, 0, 0, 0
    by_type = np.zeros(K)
    X = np.zeros((0, K))
    A = np.zeros(0, dtype=np.int64)
    arrA, scA, TA, recA = np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros((0, K)), np.zeros((0, K))
    integral, holds = False, np.zeros(0, dtype=bool)
    changed = False
    while (nxt < N or active) and t < max_s:
        while nxt < N and arr[order[nxt]] <= t:
            j = int(order[nxt])
            if runnable[j]:
                active.append(j)
                changed = True
            nxt += 1
        if not active:
            if nxt < N:
                t = max(t + round_s, math.ceil(arr[order[nxt]] / round_s) * round_s)
            continue
        if changed:
            A = np.array(active, dtype=np.int64)
            arrA, scA, TA = arr[A], sc[A], T[A]
            # the policies see speeds relative to each job's fastest type and work in seconds there,
            # as the event simulator's jobs carry them: the same LP, whichever driver asks
            best = TA.max(axis=1)
            X = allocator.allocate(Problem(A, TA / best[:, None], scA, cap, prices, t - arrA, rem[A] / best))
            solves += 1
            recA = np.zeros((len(A), K))   # time received per type since this allocation
            since = 0.0
            changed = False
            # an integral X (FIFO, an underloaded cluster) may be a fixed point: see below
            integral = bool(np.all((X == 0) | (X >= 1 - 1e-9)))
            holds = X.sum(axis=1) > 0
        asg = assign(X, recA, since, scA, cap, service[A] / np.maximum(t - arrA, 1.0))
        if check is not None:
            check(X, asg, scA, cap)
        rounds += 1
        r = np.flatnonzero(asg >= 0)
        idx, k = A[r], asg[r]
        moved = (prev[idx] != k) & (service[idx] > 0)
        switches += int(np.count_nonzero(moved))
        rate = TA[r, k]
        need = rem[idx] / rate
        if switch_s > 0:
            over = np.where(moved, switch_s, 0.0)
            fin = need <= round_s - over + 1e-9
            used = np.where(fin, over + need, round_s)
            rem[idx] = np.where(fin, 0.0, rem[idx] - rate * (round_s - over))
        else:   # the same arithmetic with over = 0, three array operations fewer per round
            fin = need <= round_s + 1e-9
            used = np.where(fin, need, round_s)
            rem[idx] = np.where(fin, 0.0, rem[idx] - rate * round_s)
        held = scA[r] * used
        busy += float(held.sum())
        by_type += np.bincount(k, weights=held, minlength=K)
        recA[r, k] += used
        service[idx] += used
        prev[A] = -1
        prev[idx] = k
        since += round_s
        if fin.any():
            end[idx[fin]] = t + used[fin]
            done = set(idx[fin].tolist())
            active = [j for j in active if j not in done]
            changed = True
            t += round_s
            continue
        t += round_s
        # a fixed point: integral X and every job holding an allocation runs there -> nothing
        # changes before the next arrival or completion: advance those rounds in one step
        if not integral or len(r) == 0 or len(r) != int(holds.sum()) or np.any(X[r, k] < 1 - 1e-9):
            continue
        n = int(np.min(np.floor(rem[idx] / (rate * round_s) - 1e-9)))
        if nxt < N:
            n = min(n, math.ceil(arr[order[nxt]] / round_s - 1e-9) - round(t / round_s))
        if n >= 1:
            d = n * round_s
            rem[idx] -= rate * d
            busy += float(scA[r].sum()) * d
            by_type += np.bincount(k, weights=scA[r] * d, minlength=K)
            recA[r, k] += d
            service[idx] += d
            since += d
            t += d
            rounds += n
    ends = end[~np.isnan(end)]
    makespan = float(ends.max()) if len(ends) else 0.0
    return RoundResult(end, arr, sc, busy, makespan, int(cap.sum()), rounds, solves, switches, by_type)
