"""The Gavel engine's speed-ups change no result, bit for bit: the array engine against the
round-by-round reference it replaced (numpy over all active jobs, `assign` every round), the
column-wise max-min LP against the dense one through `solve_lp`, the classes against a dict of
row bytes, remembered LP solutions and the reused HiGHS instance against fresh solves."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

from gpucluster.sim.rounds import allocation, load_all, lp
from gpucluster.sim.rounds.allocation import TIE_WEIGHT, Allocator, Problem, solve_lp
from gpucluster.sim.rounds.engine import RoundResult, run_rounds
from gpucluster.sim.rounds.mechanism import Pairs, assign


def reference_rounds(arr, sc, steps, T, cap, allocator: Allocator, round_s: float, switch_s: float) -> RoundResult:
    """The engine as it was before the speed-ups (per-job numpy arrays, `assign` each round)."""
    N, K = T.shape
    order = np.argsort(arr, kind="stable")
    rem = np.asarray(steps, dtype=float).copy()
    end = np.full(N, np.nan)
    service = np.zeros(N)
    prev = np.full(N, -1, dtype=np.int64)
    runnable = np.asarray(((T > 0) & (sc[:, None] <= cap[None, :])).any(axis=1))
    active: list[int] = []
    nxt, t, since = 0, 0.0, 0.0
    busy, rounds, solves, switches = 0.0, 0, 0, 0
    by_type = np.zeros(K)
    X = np.zeros((0, K))
    A = np.zeros(0, dtype=np.int64)
    arrA, scA, TA, recA = np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros((0, K)), np.zeros((0, K))
    integral, holds, changed = False, np.zeros(0, dtype=bool), False
    while nxt < N or active:
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
            best = TA.max(axis=1)
            X = allocator.allocate(Problem(A, TA / best[:, None], scA, cap, None, t - arrA, rem[A] / best))
            solves += 1
            recA = np.zeros((len(A), K))
            since, changed = 0.0, False
            integral = bool(np.all((X == 0) | (X >= 1 - 1e-9)))
            holds = X.sum(axis=1) > 0
        asg = assign(X, recA, since, scA, cap, service[A] / np.maximum(t - arrA, 1.0))
        rounds += 1
        r = np.flatnonzero(asg >= 0)
        idx, k = A[r], asg[r]
        moved = (prev[idx] != k) & (service[idx] > 0)
        switches += int(np.count_nonzero(moved))
        rate = TA[r, k]
        need = rem[idx] / rate
        over = np.where(moved, switch_s, 0.0)
        fin = need <= round_s - over + 1e-9
        used = np.where(fin, over + need, round_s)
        rem[idx] = np.where(fin, 0.0, rem[idx] - rate * (round_s - over))
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
            since, t, rounds = since + d, t + d, rounds + n
    ends = end[~np.isnan(end)]
    return RoundResult(end, arr, sc, busy, float(ends.max()) if len(ends) else 0.0, int(cap.sum()), rounds, solves,
                       switches, by_type)


def _trace(rng: np.random.Generator, n: int):
    arr = rng.random(n) * 40 * 360
    on_start = rng.random(n) < 0.3                  # some arrive on a round's start
    arr[on_start] = np.round(arr[on_start] / 360) * 360
    sc = rng.choice([1, 1, 1, 2, 4, 8], n).astype(np.int64)
    kinds = rng.random((4, 3)) * 10 * (rng.random((4, 3)) < 0.85)
    kinds[:, 0] = np.maximum(kinds[:, 0], 0.5)       # every kind runs somewhere
    T = kinds[rng.integers(0, 4, n)]
    steps = rng.random(n) * 4e4 + 1.0
    cap = rng.integers(2, 10, 3).astype(np.int64)
    return arr, sc, steps, T, cap


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_perf",
                                    "fifo_gavel_code"])
@pytest.mark.parametrize("round_s, switch_s", [(360.0, 0.0), (360.0, 30.0), (250.3, 7.1)])
def test_engine_equals_the_round_by_round_reference(policy, round_s, switch_s):
    rng = np.random.default_rng([sum(map(ord, policy)), int(round_s * 4), int(switch_s * 4)])
    for _ in range(6):
        arr, sc, steps, T, cap = _trace(rng, int(rng.integers(5, 40)))
        got = run_rounds(arr, sc, steps, T, cap, load_all().get(policy)(seed=1), round_s=round_s, switch_s=switch_s)
        ref = reference_rounds(arr, sc, steps, T, cap, load_all().get(policy)(seed=1), round_s, switch_s)
        assert np.array_equal(got.end_s, ref.end_s, equal_nan=True)
        assert (got.busy_gpu_s, got.makespan_s) == (ref.busy_gpu_s, ref.makespan_s)
        assert (got.rounds, got.solves, got.switches) == (ref.rounds, ref.solves, ref.switches)
        assert got.busy_gpu_s_by_type is not None and ref.busy_gpu_s_by_type is not None
        assert np.array_equal(got.busy_gpu_s_by_type, ref.busy_gpu_s_by_type)


def _classes_reference(c, scale, ok):
    key = np.concatenate([c, scale[:, None].astype(float), ok.astype(float)], axis=1)
    index: dict[bytes, int] = {}
    inverse = np.empty(len(key), dtype=np.int64)
    first: list[int] = []
    for i, row in enumerate(key):
        u = index.setdefault(row.tobytes(), len(first))
        if u == len(first):
            first.append(i)
        inverse[i] = u
    return np.array(first, dtype=np.int64), inverse, np.bincount(inverse).astype(float)


def _dense_max_min_lp(cu, su, counts, capacity, oku):
    """The max-min LP as first written: dense rows, for solve_lp."""
    u, K = cu.shape
    n = u * K + 1
    A = np.zeros((u + K + u, n))
    r = np.arange(u)
    for k in range(K):
        A[r, r * K + k] = 1.0
        A[u + k, r * K + k] = counts * su
        A[u + K + r, r * K + k] = -cu[:, k]
    A[u + K:, -1] = 1.0
    b = np.concatenate([np.ones(u), capacity.astype(float), np.zeros(u)])
    bounds = np.zeros((n, 2))
    bounds[:u * K, 1] = np.where(oku.ravel(), 1.0, 0.0)
    bounds[u * K:, 1] = np.inf
    cost = np.concatenate([-TIE_WEIGHT * (counts[:, None] * cu).ravel() / float(counts.sum()), [-1.0]])
    return cost, A, b, bounds


def test_classes_and_column_wise_lp_equal_the_dense_ones():
    rng = np.random.default_rng(5)
    for _ in range(200):
        m, K = int(rng.integers(1, 40)), int(rng.integers(1, 4))
        kinds = rng.random((int(rng.integers(1, 6)), K)) * (rng.random((1, K)) < 0.8)
        c = kinds[rng.integers(0, len(kinds), m)]
        scale = rng.choice([1, 2, 4, 8], m)
        ok = c > 0
        got, ref = allocation._classes(c, scale, ok), _classes_reference(c, scale, ok)
        for g, r in zip(got, ref, strict=True):
            assert np.array_equal(g, r)
        rep, _, counts = got
        cu, su, oku = c[rep], scale[rep], ok[rep]
        cap = rng.integers(1, 12, K)
        cost, start, index, value, lower, upper, row_upper = allocation._max_min_lp(cu, su, counts, cap, oku)
        dcost, A, b, bounds = _dense_max_min_lp(cu, su, counts, cap, oku)
        At = A.T
        nz = At != 0
        assert np.array_equal(cost, dcost) and np.array_equal(row_upper, b)
        assert np.array_equal(lower, bounds[:, 0]) and np.array_equal(upper, bounds[:, 1])
        assert np.array_equal(start, np.concatenate([[0], np.cumsum(nz.sum(axis=1))]))
        assert np.array_equal(index, np.nonzero(nz)[1]) and np.array_equal(value, At[nz])
        x = allocation.solve_csc(cost, start, index, value, lower, upper, row_upper)
        xd = solve_lp(dcost, A, b, bounds)
        assert x is not None and xd is not None and np.array_equal(x, xd)


def test_remembered_lps_and_the_reused_solver_equal_fresh_solves(monkeypatch):
    rng = np.random.default_rng(9)
    probs = []
    for _ in range(60):
        m, K = int(rng.integers(1, 30)), 3
        T = rng.choice([0.5, 1.0, 2.0], (3, K))[rng.integers(0, 3, m)]
        probs.append(Problem(np.arange(m), T, rng.choice([1, 2, 4], m), rng.integers(2, 9, K)))
    probs += probs[::3]                                      # repeats: answered from memory
    for name in ("max_min_fairness_perf", "max_min_fairness"):
        alloc = load_all().get(name)()
        got = [alloc.allocate(p) for p in probs]
        assert len(alloc.memo) < len(probs)
        fresh = []
        for p in probs:
            monkeypatch.setattr(lp._LOCAL, "highs", None)   # a new HiGHS instance per solve
            fresh.append(load_all().get(name)().allocate(p))
        for g, f in zip(got, fresh, strict=True):
            assert np.array_equal(g, f)


def test_pair_order_shortcut_when_every_pair_has_received_time():
    rng = np.random.default_rng(12)
    for _ in range(300):
        m, K = int(rng.integers(1, 30)), 3
        X = np.round(rng.random((m, K)) * (rng.random((m, K)) < 0.6), 2)
        pairs = Pairs(X, rng.choice([1, 2, 4], m))
        if len(pairs) == 0:
            continue
        rec = rng.choice([360.0, 720.0, 1080.0, 3600.0], len(pairs))
        since = float(rng.choice([360.0, 1080.0, 7200.0]))
        svc = np.round(rng.random(len(pairs)), 1)
        assert pairs.order(rec, since, svc, True) == pairs.order(rec, since, svc)
