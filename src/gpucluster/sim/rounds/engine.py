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
from gpucluster.sim.rounds.mechanism import Pairs


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
    cap_list = cap.tolist()
    N, K = T.shape
    order = np.argsort(arr, kind="stable")
    rem = np.asarray(steps, dtype=float).copy()
    end = np.full(N, np.nan)
    service = np.zeros(N)
    prev = np.full(N, -1, dtype=np.int64)
    # a job no type can ever hold never runs (Gavel would wait forever): leave it out
    runnable = np.asarray(((T > 0) & (sc[:, None] <= cap[None, :])).any(axis=1))
    # GPU-seconds of a round where no job ends are whole GPUs x round_s: with an integral round_s
    # they are exact sums in any order, so they are added per type, not per job
    exact = float(round_s).is_integer() and float(cap.sum()) * round_s < 2.0 ** 52
    active: list[int] = []
    nxt, t, since = 0, 0.0, 0.0
    busy, rounds, solves, switches = 0.0, 0, 0, 0
    by_type = np.zeros(K)
    # the active jobs' state lives in local arrays (index = position in A) between changes
    A = np.zeros(0, dtype=np.int64)
    X = np.zeros((0, K))
    remA, svcA, prevA = np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    pairs = Pairs(X, sc[A])
    recP = np.zeros(0)                       # time received per pair since the allocation
    p_arr, p_rate = np.zeros(0), np.zeros(0)
    integral, held_jobs = False, 0
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
            rem[A], service[A], prev[A] = remA, svcA, prevA
            A = np.array(active, dtype=np.int64)
            arrA, scA, TA = arr[A], sc[A], T[A]
            remA, svcA, prevA = rem[A], service[A], prev[A]
            # the policies see speeds relative to each job's fastest type and work in seconds there,
            # as the event simulator's jobs carry them: the same LP, whichever driver asks
            best = TA.max(axis=1)
            X = allocator.allocate(Problem(A, TA / best[:, None], scA, cap, prices, t - arrA, remA / best))
            solves += 1
            pairs = Pairs(X, scA)
            recP = np.zeros(len(pairs))
            p_arr, p_rate = arrA[pairs.job], TA[pairs.job, pairs.type]
            since = 0.0
            changed = False
            # an integral X (FIFO, an underloaded cluster) may be a fixed point: see below
            integral = bool(np.all((X == 0) | (X >= 1 - 1e-9)))
            held_jobs = int(np.count_nonzero(X.sum(axis=1) > 0))
        if len(pairs):
            win = pairs.winners(pairs.order(recP, since, svcA[pairs.job] / np.maximum(t - p_arr, 1.0)), cap_list)
            win.sort()                       # job order, as the per-job arrays are
        else:
            win = []
        if check is not None:
            asg = np.full(len(A), -1, dtype=np.int64)
            asg[pairs.job[win]] = pairs.type[win]
            check(X, asg, scA, cap)
        rounds += 1
        w = np.array(win, dtype=np.int64)
        r, k, rate = pairs.job[w], pairs.type[w], p_rate[w]
        rem_r = remA[r]
        moved = (prevA[r] != k) & (svcA[r] > 0)
        switches += int(np.count_nonzero(moved))
        need = rem_r / rate
        span = np.where(moved, round_s - switch_s, round_s) if switch_s > 0 else round_s
        fin = need <= span + 1e-9
        prevA[:] = -1
        prevA[r] = k
        since += round_s
        if fin.any() or not exact:
            over = np.where(moved, switch_s, 0.0) if switch_s > 0 else 0.0
            used = np.where(fin, over + need, round_s)
            remA[r] = np.where(fin, 0.0, rem_r - rate * span)
            held = scA[r] * used
            busy += float(held.sum())
            by_type += np.bincount(k, weights=held, minlength=K)
            recP[w] += used
            svcA[r] += used
            if fin.any():
                end[A[r[fin]]] = t + used[fin]
                done = set(A[r[fin]].tolist())
                active = [j for j in active if j not in done]
                changed = True
                t += round_s
                continue
        else:
            remA[r] = rem_r - rate * span
            gpus = [0] * K
            for i in win:
                gpus[pairs.types[i]] += pairs.need[i]
            busy += float(sum(gpus) * round_s)
            by_type += np.array(gpus) * round_s
            recP[w] += round_s
            svcA[r] += round_s
        t += round_s
        # a fixed point: integral X and every job holding an allocation runs there -> nothing
        # changes before the next arrival or completion: advance those rounds in one step
        if not integral or len(win) == 0 or len(win) != held_jobs or np.any(pairs.x[w] < 1 - 1e-9):
            continue
        n = int(np.min(np.floor(remA[r] / (rate * round_s) - 1e-9)))
        if nxt < N:
            n = min(n, math.ceil(arr[order[nxt]] / round_s - 1e-9) - round(t / round_s))
        if n >= 1:
            d = n * round_s
            remA[r] -= rate * d
            busy += float(scA[r].sum()) * d
            by_type += np.bincount(k, weights=scA[r] * d, minlength=K)
            recP[w] += d
            svcA[r] += d
            since += d
            t += d
            rounds += n
    ends = end[~np.isnan(end)]
    makespan = float(ends.max()) if len(ends) else 0.0
    return RoundResult(end, arr, sc, busy, makespan, int(cap.sum()), rounds, solves, switches, by_type)
