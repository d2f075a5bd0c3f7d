"""Rounds over job combinations (space sharing), as engine.py runs rounds over jobs.

Each round, the combinations with X > 0 are taken in decreasing priority (mechanism.py's
rule: X / share of the time this combination received on that type since the allocation
changed, 1e9 x X before it ran), equal priorities to the combination whose jobs have had
the least service; a combination runs only if none of its jobs already runs this round
and its type has `scale` GPUs left (a pair holds them once). Each job of a running pair
advances at its packed throughput until the round ends or it finishes (its partner keeps
the packed figure to the round's end, the GPUs free at the next round, as a job ending
mid-round does in engine.py). Arrivals, completions, `switch_s` and the fast-forward of
integral allocations are engine.py's. With no pair worth packing it gives engine.py's
max_min_fairness_perf results (a test).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpucluster.sim.rounds.engine import RoundResult, admit
from gpucluster.sim.rounds.mechanism import priorities
from gpucluster.sim.rounds.packing import Combos, MaxMinFairnessPacked, PackedProblem


@dataclass
class PackedRoundResult(RoundResult):
    packed_gpu_s: float = 0.0    # GPU-seconds held by pairs (each pair's GPUs once)


PackedCheck = Callable[[Combos, np.ndarray, np.ndarray, np.ndarray], None]


def assign_combos(cm: Combos, received_s: np.ndarray, since_reset_s: float, scale: np.ndarray,
                  capacity: np.ndarray, service: np.ndarray) -> np.ndarray:
    """Type index each combination runs on this round (-1: none); `scale` and `service` per job."""
    c, K = cm.X.shape
    got = np.full(c, -1, dtype=np.int64)
    pos = np.flatnonzero(cm.X.ravel() > 0)
    if len(pos) == 0:
        return got
    pri = priorities(cm.X, received_s, since_reset_s).ravel()[pos]
    rows = pos // K
    a, b = cm.a[rows], cm.b[rows]
    pair = b >= 0
    svc = np.where(pair, 0.5 * (service[a] + service[np.maximum(b, 0)]), service[a])
    order = pos[np.lexsort((svc, -pri))]
    rows_o = order // K
    left = capacity.tolist()
    busy: set[int] = set()
    smallest = int(scale.min())
    taken = [-1] * c
    ai, bi = cm.a[rows_o], cm.b[rows_o]
    for row, k, i, j, n in zip(rows_o.tolist(), (order % K).tolist(), ai.tolist(), bi.tolist(),
                               scale[ai].tolist(), strict=True):
        if taken[row] >= 0 or i in busy or j in busy or n > left[k]:
            continue
        taken[row] = k
        left[k] -= n
        busy.add(i)
        if j >= 0:
            busy.add(j)
        if left[k] < smallest and max(left) < smallest:
            break
    got[:] = taken
    return got


def run_packed_rounds(arrival_s: np.ndarray, scale: np.ndarray, steps: np.ndarray, throughput: np.ndarray,
                      capacity: np.ndarray, kind: np.ndarray, pair_rate: np.ndarray,
                      allocator: MaxMinFairnessPacked | None = None, *, round_s: float = 360.0,
                      switch_s: float = 0.0, max_s: float = 3650 * 86400.0,
                      check: PackedCheck | None = None) -> PackedRoundResult:
    """Run jobs (arrival, GPUs, steps, steps/s per type, kind) with packing on `capacity` GPUs
    per type; `pair_rate[k, a, b]` = steps/s of a job of kind a beside one of kind b on type k
    (`table_pairs`). `check(combos, assignment, scale, capacity)` is called every round."""
    if round_s <= 0 or switch_s < 0 or switch_s >= round_s:
        raise ValueError("round_s > 0 and 0 <= switch_s < round_s")
    alloc = allocator if allocator is not None else MaxMinFairnessPacked()
    arr = np.asarray(arrival_s, dtype=float)
    sc = np.asarray(scale, dtype=np.int64)
    T = np.asarray(throughput, dtype=float)
    cap = np.asarray(capacity, dtype=np.int64)
    kd = np.asarray(kind, dtype=np.int64)
    PR = np.asarray(pair_rate, dtype=float)
    N, K = T.shape
    order = np.argsort(arr, kind="stable")
    arr_o = arr[order].tolist()
    rem = np.asarray(steps, dtype=float).copy()
    end = np.full(N, np.nan)
    service = np.zeros(N)
    prev = np.full(N, -1, dtype=np.int64)
    runnable = np.asarray(((T > 0) & (sc[:, None] <= cap[None, :])).any(axis=1))
    active: list[int] = []
    nxt, t, since = 0, 0.0, 0.0
    busy, packed, rounds, solves, switches = 0.0, 0.0, 0, 0, 0
    by_type = np.zeros(K)
    A = np.zeros(0, dtype=np.int64)
    arrA, scA, best = np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)
    cm = Combos(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, K)), np.zeros((0, K)),
                np.zeros((0, K)))
    recC = np.zeros((0, K))
    ga, gb = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)     # global job ids per combination
    integral = False
    changed = False
    while (nxt < N or active) and t < max_s:
        nxt, t, admitted = admit(arr_o, order, runnable, nxt, t, round_s, active)
        changed = changed or admitted
        if not active:
            continue
        if changed:
            A = np.array(active, dtype=np.int64)
            arrA, scA = arr[A], sc[A]
            best = T[A].max(axis=1)
            # speeds relative to each job's fastest type, remaining work in seconds there: engine.py's units
            cm = alloc.combos(PackedProblem(A, T[A] / best[:, None], scA, cap, None, t - arrA, rem[A] / best,
                                            kind=kd[A], pair_rate=PR, unit=best))
            solves += 1
            recC = np.zeros(cm.X.shape)
            since = 0.0
            changed = False
            integral = bool(np.all((cm.X == 0) | (cm.X >= 1 - 1e-9)))
            ga, gb = A[cm.a], np.where(cm.b >= 0, A[np.maximum(cm.b, 0)], -1)
        asg = assign_combos(cm, recC, since, scA, cap, service[A] / np.maximum(t - arrA, 1.0))
        if check is not None:
            check(cm, asg, scA, cap)
        rounds += 1
        r = np.flatnonzero(asg >= 0)
        k = asg[r]
        # one entry per (running combination, job in it): the pair's second jobs after the firsts
        pr = r[gb[r] >= 0]
        idx = np.concatenate([ga[r], gb[pr]])
        kk = np.concatenate([k, asg[pr]])
        # steps/s from the inputs themselves (not the allocator's relative units: no rounding)
        ia, ib = ga[r], gb[r]
        ra = np.where(ib >= 0, PR[k, kd[ia], kd[np.maximum(ib, 0)]], T[ia, k])
        rate = np.concatenate([ra, PR[asg[pr], kd[gb[pr]], kd[ga[pr]]]])
        moved = (prev[idx] != kk) & (service[idx] > 0)
        switches += int(np.count_nonzero(moved))
        with np.errstate(divide="ignore"):
            need = np.where(rate > 0, rem[idx] / np.where(rate > 0, rate, 1.0), np.inf)
        if switch_s > 0:
            over = np.where(moved, switch_s, 0.0)
            fin = need <= round_s - over + 1e-9
            used = np.where(fin, over + need, round_s)
            rem[idx] = np.where(fin, 0.0, rem[idx] - rate * (round_s - over))
        else:
            fin = need <= round_s + 1e-9
            used = np.where(fin, need, round_s)
            rem[idx] = np.where(fin, 0.0, rem[idx] - rate * round_s)
        held_s = used[:len(r)].copy()          # a combination holds its GPUs until its last job stops
        if len(pr):
            where = np.searchsorted(r, pr)
            held_s[where] = np.maximum(held_s[where], used[len(r):])
            packed += float((scA[cm.a[pr]] * held_s[where]).sum())
        held = scA[cm.a[r]] * held_s
        busy += float(held.sum())
        by_type += np.bincount(k, weights=held, minlength=K)
        recC[r, k] += held_s
        service[idx] += used
        prev[A] = -1
        prev[idx] = kk
        since += round_s
        if fin.any():
            end[idx[fin]] = t + used[fin]
            done = set(idx[fin].tolist())
            active = [j for j in active if j not in done]
            changed = True
            t += round_s
            continue
        t += round_s
        # integral X and every combination holding an allocation runs there: nothing changes
        # before the next arrival or completion (engine.py's fast-forward)
        if (not integral or len(r) == 0 or len(r) != int(np.count_nonzero(cm.X.sum(axis=1) > 0))
                or np.any(cm.X[r, k] < 1 - 1e-9) or not np.all(rate > 0)):
            continue
        n = int(np.min(np.floor(rem[idx] / (rate * round_s) - 1e-9)))
        if nxt < N:
            n = min(n, math.ceil(arr[order[nxt]] / round_s - 1e-9) - round(t / round_s))
        if n >= 1:
            d = n * round_s
            rem[idx] -= rate * d
            busy += float(scA[cm.a[r]].sum()) * d
            packed += float(scA[cm.a[pr]].sum()) * d
            by_type += np.bincount(k, weights=scA[cm.a[r]] * d, minlength=K)
            recC[r, k] += d
            service[idx] += d
            since += d
            t += d
            rounds += n
    ends = end[~np.isnan(end)]
    makespan = float(ends.max()) if len(ends) else 0.0
    return PackedRoundResult(end, arr, sc, busy, makespan, int(cap.sum()), rounds, solves, switches, by_type,
                             packed_gpu_s=packed)


def table_pairs(table, jobs: list[tuple[str, int]], gpus: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Kinds of jobs given as (job type, GPUs) and the packed figures between kinds from a
    Gavel throughput table (sim/throughputs.py's ThroughputTable): (kind per job, pair_rate
    (K, kinds, kinds)). Only jobs of the same GPU count pair; a pair the table lacks is 0
    (not packable); two jobs of the same type each get the mean of the table's two figures."""
    kinds: dict[tuple[str, int], int] = {}
    kind = np.array([kinds.setdefault(j, len(kinds)) for j in jobs], dtype=np.int64)
    names = list(kinds)
    P = np.zeros((len(gpus), len(names), len(names)))
    for k, g in enumerate(gpus):
        for a, (ta, sa) in enumerate(names):
            for b, (tb, sb) in enumerate(names):
                if sa != sb:
                    continue
                this, other = table.pair(ta, tb, g, sa)
                if this == 0 and other == 0:     # measured the other way round only
                    other, this = table.pair(tb, ta, g, sa)
                P[k, a, b] = 0.5 * (this + other) if ta == tb else this
    return kind, P
