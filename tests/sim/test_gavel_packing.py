"""Space sharing (Gavel's max_min_fairness_packed): the packed LP's invariants, its value
against the unpacked LP's, the pruning's exactness, the packed round engine's invariants
every round, hand-computed completions, and packed == unpacked when nothing packs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

from gpucluster.sim.rounds import allocation, load_all, packing
from gpucluster.sim.rounds.allocation import MaxMinFairnessPerf, Problem
from gpucluster.sim.rounds.engine import run_rounds
from gpucluster.sim.rounds.packed_engine import assign_combos, run_packed_rounds, table_pairs
from gpucluster.sim.rounds.packing import Combos, MaxMinFairnessPacked, PackedProblem, packed_max_min

DATA = Path(__file__).parent / "data"
TOL = 1e-6


def _kinds(rng: np.random.Generator, K: int, nk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alone throughputs (nk, K), scales (nk,) and packed figures (K, nk, nk); some pairs missing,
    some useless (a + b <= 1), some types infeasible for a kind."""
    alone = rng.random((nk, K)) * 10 * (rng.random((nk, K)) < 0.85)
    kscale = rng.choice([1, 1, 1, 2, 4], nk)
    frac = rng.random((K, nk, nk)) * 0.9 + 0.1                       # fraction of alone speed when packed
    P = frac * alone.T[:, :, None] * (rng.random((K, nk, nk)) < 0.8)
    P = np.where(kscale[None, :, None] == kscale[None, None, :], P, 0.0)
    return alone, kscale, P


def _problem(rng: np.random.Generator, no_pairs: bool = False) -> PackedProblem:
    m, K, nk = int(rng.integers(1, 25)), int(rng.integers(1, 4)), int(rng.integers(1, 6))
    alone, kscale, P = _kinds(rng, K, nk)
    kind = rng.integers(0, nk, m)
    T = alone[kind]
    best = np.maximum(T.max(axis=1), 1e-9)
    cap = rng.integers(1, 10, K)
    return PackedProblem(np.arange(m), T / best[:, None], kscale[kind], cap, kind=kind,
                         pair_rate=np.zeros_like(P) if no_pairs else P, unit=best)


def _check_combos(p: PackedProblem, cm: Combos) -> None:
    m = len(p.scale)
    ok = p.feasible()
    assert np.all(cm.X >= 0)
    # per job: time over all its combinations and types <= 1
    assert np.all(cm.job_time(m).sum(axis=1) <= 1 + TOL)
    # per type: a pair uses its scale GPUs once
    used = (p.scale[cm.a][:, None] * cm.X).sum(axis=0)
    assert np.all(used <= p.capacity + TOL)
    pair = cm.b >= 0
    # pairs: two different jobs, equal scale, a packed figure in the table, both feasible there
    assert np.all(cm.a[pair] != cm.b[pair])
    assert np.all(p.scale[cm.a[pair]] == p.scale[cm.b[pair]])
    for row in np.flatnonzero(pair):
        for k in np.flatnonzero(cm.X[row] > 0):
            i, j = cm.a[row], cm.b[row]
            assert ok[i, k] and ok[j, k]
            assert p.pair_rate[k, p.kind[i], p.kind[j]] > 0 or p.pair_rate[k, p.kind[j], p.kind[i]] > 0
    # singles only where the job can run
    for row in np.flatnonzero(~pair):
        assert np.all(ok[cm.a[row]][cm.X[row] > 0])


def _unpacked(p: Problem) -> tuple[float, float]:
    """The unpacked LP's minimum and mean normalised throughput."""
    X = MaxMinFairnessPerf().allocate(p)
    ok = p.feasible()
    T = np.where(ok, p.throughput, 0.0)
    w = p.capacity / max(1.0, float(p.capacity.sum()))
    eq = (T * w).sum(axis=1)
    live = ok.any(axis=1)
    if not live.any():
        return 0.0, 0.0
    got = (p.scale * (X * T).sum(axis=1) / np.maximum(eq, 1e-300))[live]
    return float(got.min()), float(got.mean())


def _unpacked_value(p: Problem) -> float:
    return _unpacked(p)[0]


def test_registered_and_plain_problem_is_unpacked():
    alloc = load_all().get("max_min_fairness_packed")()
    assert isinstance(alloc, MaxMinFairnessPacked)
    p = Problem(np.arange(3), np.array([[1.0, 0.5], [0.2, 1.0], [1.0, 1.0]]), np.array([1, 1, 2]), np.array([2, 2]))
    np.testing.assert_allclose(alloc.allocate(p), MaxMinFairnessPerf().allocate(p), atol=0)


def test_lp_invariants_and_value_on_random_problems():
    """Packing only adds columns: the LP's objective (min + TIE_WEIGHT x mean normalised
    throughput, as max_min_fairness_perf's) never drops."""
    rng = np.random.default_rng(3)
    packed_some = 0
    for _ in range(150):
        p = _problem(rng)
        cm = packed_max_min(p)
        _check_combos(p, cm)
        vmin, vmean = _unpacked(p)
        base = vmin + allocation.TIE_WEIGHT * vmean
        assert cm.value + allocation.TIE_WEIGHT * cm.mean >= base - 1e-6 * max(1.0, base)
        packed_some += bool(np.any(cm.b >= 0))
        # the rows the policy reports are the job-level times
        np.testing.assert_allclose(MaxMinFairnessPacked().allocate(p), cm.job_time(len(p.scale)))
    assert packed_some > 20     # the random problems do exercise packing


def test_max_min_value_never_drops_without_tie_breaker(monkeypatch):
    """With the tie-breaker off both LPs are pure max-min: the packed minimum is >= the unpacked."""
    monkeypatch.setattr(allocation, "TIE_WEIGHT", 0.0)
    monkeypatch.setattr(packing, "TIE_WEIGHT", 0.0)
    rng = np.random.default_rng(4)
    for _ in range(100):
        p = _problem(rng)
        base = _unpacked_value(p)
        assert packed_max_min(p).value >= base - 1e-6 * max(1.0, base)


def test_pruning_keeps_the_optimum():
    rng = np.random.default_rng(5)
    for _ in range(100):
        p = _problem(rng)
        pruned, full = packed_max_min(p), packed_max_min(p, prune=False)
        _check_combos(p, full)
        w = allocation.TIE_WEIGHT
        assert pruned.value + w * pruned.mean == pytest.approx(full.value + w * full.mean, rel=1e-6, abs=1e-9)


def _job_level_objective(p: PackedProblem) -> float:
    """Gavel's LP as written, one column per job alone and per pair of jobs (every pair of
    equal scale with a packed figure, no classes, no pruning) on each type, by linprog:
    the optimum of min + TIE_WEIGHT x mean normalised throughput."""
    from scipy.optimize import linprog
    m, K = p.throughput.shape
    ok = p.feasible()
    T = np.where(ok, p.throughput, 0.0)
    w = p.capacity / max(1.0, float(p.capacity.sum()))
    eq = (T * w).sum(axis=1)
    live = np.flatnonzero(ok.any(axis=1))
    if len(live) == 0:
        return 0.0
    unit = p.unit if p.unit is not None else np.ones(m)
    norm = p.scale / np.maximum(eq, 1e-300)
    cols = [(i, -1, k) for i in range(m) for k in range(K)]
    cols += [(i, j, k) for i in range(m) for j in range(i + 1, m) for k in range(K)
             if p.scale[i] == p.scale[j] and ok[i, k] and ok[j, k]
             and (p.pair_rate[k, p.kind[i], p.kind[j]] > 0 or p.pair_rate[k, p.kind[j], p.kind[i]] > 0)]
    n = len(cols) + 1
    A = np.zeros((m + K + len(live), n))
    gain = np.zeros((m, n))          # normalised throughput of each job per unit of each column
    ub = np.ones(n)
    for c, (i, j, k) in enumerate(cols):
        A[i, c] = 1.0
        A[m + k, c] = p.scale[i]
        if j < 0:
            gain[i, c] = norm[i] * T[i, k]
            ub[c] = 1.0 if ok[i, k] else 0.0
        else:
            A[j, c] = 1.0
            gain[i, c] = norm[i] * p.pair_rate[k, p.kind[i], p.kind[j]] / unit[i]
            gain[j, c] = norm[j] * p.pair_rate[k, p.kind[j], p.kind[i]] / unit[j]
    A[m + K:, :] = -gain[live]
    A[m + K:, -1] = 1.0
    b = np.concatenate([np.ones(m), p.capacity.astype(float), np.zeros(len(live))])
    cost = -allocation.TIE_WEIGHT * gain[live].sum(axis=0) / len(live)
    cost[-1] = -1.0
    ub[-1] = np.inf
    res = linprog(cost, A_ub=A, b_ub=b, bounds=np.stack([np.zeros(n), ub], axis=1), method="highs")
    assert res.status == 0
    return float(-res.fun)


def test_classes_and_pruning_give_gavels_job_level_optimum():
    """The class LP with pruning reaches the optimum of Gavel's LP over every job pair."""
    rng = np.random.default_rng(17)
    checked = 0
    for _ in range(120):
        p = _problem(rng)
        if len(p.scale) > 9:
            continue
        cm = packed_max_min(p)
        ref = _job_level_objective(p)
        assert cm.value + allocation.TIE_WEIGHT * cm.mean == pytest.approx(ref, rel=1e-6, abs=1e-9)
        checked += 1
    assert checked > 30


def test_value_is_the_effective_min_and_classes_are_exact():
    """Jobs of one class get the same time per type and throughput (the spread is exact), and
    the reported value is the minimum normalised throughput of the jobs."""
    rng = np.random.default_rng(9)
    for _ in range(60):
        p = _problem(rng)
        cm = packed_max_min(p)
        m = len(p.scale)
        time, thr = cm.job_time(m), cm.job_throughput(m)
        for kd in np.unique(p.kind):
            js = np.flatnonzero(p.kind == kd)
            np.testing.assert_allclose(time[js], np.broadcast_to(time[js[0]], time[js].shape), atol=1e-7)
            np.testing.assert_allclose(thr[js], thr[js[0]], atol=1e-7)


def test_hand_made_lp():
    """One GPU, two jobs at 1 step/s alone, 0.8 and 0.6 packed: max t with sA + 0.8y >= t,
    sB + 0.6y >= t, sA + sB + y <= 1 gives y = 5/6, sB = 1/6, t = 2/3 (unpacked: 1/2)."""
    P = np.zeros((1, 2, 2))
    P[0, 0, 1], P[0, 1, 0] = 0.8, 0.6
    p = PackedProblem(np.arange(2), np.ones((2, 1)), np.array([1, 1]), np.array([1]), kind=np.array([0, 1]),
                      pair_rate=P)
    cm = packed_max_min(p)
    assert cm.value == pytest.approx(2 / 3)
    pair = cm.b >= 0
    assert cm.X[pair].sum() == pytest.approx(5 / 6)
    assert cm.X[~pair & (cm.a == 1)].sum() == pytest.approx(1 / 6)
    assert cm.X[~pair & (cm.a == 0)].sum() == pytest.approx(0.0, abs=1e-9)
    assert _unpacked_value(p) == pytest.approx(0.5)


def test_hand_made_completions():
    """One GPU, jobs of 450 and 900 steps at 1 step/s alone, 0.9 each packed, 100 s rounds.
    Packed all the time (y = 1, t = 0.9): A ends at 450 / 0.9 = 500 s; B has 450 steps left,
    runs alone from the round at 500 s: ends at 950 s. With B arriving at 150 s (admitted at
    200 s): A alone 200 steps, then packed: 250 / 0.9 = 277.8 s, ends at 477.8 s; B runs
    packed to the round's end at 500 s (270 steps), then 630 s alone: ends at 1130 s."""
    P = np.zeros((1, 2, 2))
    P[0, 0, 1] = P[0, 1, 0] = 0.9
    args = (np.array([1, 1]), np.array([450.0, 900.0]), np.ones((2, 1)), np.array([1]), np.array([0, 1]), P)
    r = run_packed_rounds(np.array([0.0, 0.0]), *args, round_s=100)
    np.testing.assert_allclose(r.end_s, [500.0, 950.0])
    assert r.busy_gpu_s == pytest.approx(950.0) and r.packed_gpu_s == pytest.approx(500.0)
    r = run_packed_rounds(np.array([0.0, 150.0]), *args, round_s=100)
    np.testing.assert_allclose(r.end_s, [200 + 250 / 0.9, 1130.0])
    assert r.busy_gpu_s == pytest.approx(1130.0) and r.packed_gpu_s == pytest.approx(300.0)
    assert r.utilization == pytest.approx(1.0)


def _trace(rng: np.random.Generator, n: int, K: int, nk: int):
    alone, kscale, P = _kinds(rng, K, nk)
    alone[:, 0] = np.maximum(alone[:, 0], 1.0)        # every kind runs somewhere
    kind = rng.integers(0, nk, n)
    arrival = np.sort(rng.random(n) * 20000)
    steps = rng.random(n) * 3e4 + 100
    return arrival, kscale[kind], steps, alone[kind], kind, P, alone


def test_engine_invariants_every_round():
    rng = np.random.default_rng(13)
    seen = {"pairs": 0}
    for _ in range(6):
        K, nk = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        arrival, scale, steps, T, kind, P, _ = _trace(rng, int(rng.integers(5, 30)), K, nk)
        cap = rng.integers(4, 9, K)

        def check(cm: Combos, asg: np.ndarray, sc: np.ndarray, capacity: np.ndarray) -> None:
            run = np.flatnonzero(asg >= 0)
            jobs = np.concatenate([cm.a[run], cm.b[run][cm.b[run] >= 0]])
            assert len(jobs) == len(set(jobs.tolist()))                       # a job at most once
            used = np.bincount(asg[run], weights=sc[cm.a[run]], minlength=len(capacity))
            assert np.all(used <= capacity)                                   # a pair holds scale GPUs once
            assert np.all(cm.X[run, asg[run]] > 0)                            # only allocated combinations
            seen["pairs"] += int(np.count_nonzero(cm.b[run] >= 0))

        switch_s = float(rng.choice([0.0, 30.0]))
        r = run_packed_rounds(arrival, scale, steps, T, cap, kind, P, round_s=360.0, switch_s=switch_s, check=check)
        assert r.finished.all()
        assert np.all(r.end_s >= arrival)
        assert r.busy_gpu_s <= r.gpus * r.makespan_s + 1e-6
        assert 0 <= r.packed_gpu_s <= r.busy_gpu_s + 1e-6
    assert seen["pairs"] > 0      # pairs did run


def test_engine_packs_under_load():
    """Many jobs of two kinds that pack well on one type: pairs run, and mean JCT drops."""
    P = np.zeros((1, 2, 2))
    P[0] = [[0.8, 0.75], [0.7, 0.8]]
    n = 24
    kind = np.arange(n) % 2
    args = (np.zeros(n), np.ones(n, dtype=np.int64), np.full(n, 3600.0), np.ones((n, 1)), np.array([4]))
    r = run_packed_rounds(*args, kind, P)
    base = run_rounds(*args, MaxMinFairnessPerf())
    assert r.finished.all() and r.packed_gpu_s > 0
    assert r.jct_s.mean() < base.jct_s.mean()
    assert r.makespan_s < base.makespan_s


@pytest.mark.parametrize("useless", [False, True])
def test_packed_equals_unpacked_without_useful_pairs(useless):
    """No pairs in the table (or only pairs slower than time-sharing): the packed engine gives
    engine.py's max_min_fairness_perf completions."""
    rng = np.random.default_rng(21)
    for _ in range(4):
        K = int(rng.integers(1, 4))
        arrival, scale, steps, T, kind, P, alone = _trace(rng, 25, K, 4)
        # useless: each job at 45% of its alone speed in any pair (a + b = 0.9 <= 1, pruned)
        P = np.repeat(0.45 * alone.T[:, :, None], 4, axis=2) if useless else np.zeros_like(P)
        cap = rng.integers(2, 7, K)
        a = run_packed_rounds(arrival, scale, steps, T, cap, kind, P, round_s=360.0)
        b = run_rounds(arrival, scale, steps, T, cap, MaxMinFairnessPerf(), round_s=360.0)
        # equal to rounding: engine.py may reorder its float operations (speed work), not its rounds
        np.testing.assert_allclose(a.end_s, b.end_s, rtol=1e-9)
        assert a.busy_gpu_s == pytest.approx(b.busy_gpu_s, rel=1e-9) and a.rounds == b.rounds
        assert a.packed_gpu_s == 0


def test_assign_combos_priorities_and_exclusion():
    """A job in two combinations runs in at most one; the higher priority one wins."""
    cm = Combos(np.array([0, 0, 1]), np.array([1, -1, -1]), np.array([[0.6], [0.4], [0.4]]),
                np.ones((3, 1)), np.array([[1.0], [0.0], [0.0]]))
    got = assign_combos(cm, np.zeros((3, 1)), 0.0, np.array([1, 1]), np.array([2]), np.zeros(2))
    assert got.tolist() == [0, -1, -1]
    # after the pair ran a whole round: 0.6 / 1 < 0.4 x 1e9 for the singles that did not run
    got = assign_combos(cm, np.array([[360.0], [0.0], [0.0]]), 360.0, np.array([1, 1]), np.array([2]), np.zeros(2))
    assert got.tolist() == [-1, 0, 0]


def test_table_pairs_from_gavel_table():
    from gpucluster.sim.throughputs import read_table
    table = read_table(DATA / "gavel_throughputs_2019_sample.json")
    jobs = [("ResNet-18 (batch size 32)", 1), ("LM (batch size 20)", 1), ("ResNet-18 (batch size 32)", 1),
            ("LM (batch size 20)", 2)]
    kind, P = table_pairs(table, jobs, ["v100", "p100", "k80"])
    assert kind.tolist() == [0, 1, 0, 2]
    this = table.pair("ResNet-18 (batch size 32)", "LM (batch size 20)", "v100")[0]
    assert (P[0, 0, 1], P[0, 1, 0]) == (this, table.pair("LM (batch size 20)", "ResNet-18 (batch size 32)", "v100")[0])
    same = table.pair("ResNet-18 (batch size 32)", "ResNet-18 (batch size 32)", "v100")
    assert P[0, 0, 0] == pytest.approx(0.5 * (same[0] + same[1]))
    assert np.all(P[:, 2, :2] == 0) and np.all(P[:, :2, 2] == 0)     # different GPU counts never pair


def test_benchmark_runs_packed_with_the_same_fields(capsys):
    import importlib.util
    import json
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("sim_gavel_bench", root / "benchmarks" / "sim_gavel.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main(["--trace", str(DATA / "gavel_small.trace"), "--throughputs",
                   str(DATA / "gavel_throughputs_2019_sample.json"), "--cluster", "4:4:4",
                   "--policies", "max_min_fairness_perf,max_min_fairness_packed", "--json"])
    assert rc == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [x["policy"] for x in rows] == ["max_min_fairness_perf", "max_min_fairness_packed"]
    assert set(rows[0]) <= set(rows[1]) and rows[1]["packed_gpu_h"] > 0
    for x in rows:
        assert x["jobs"] == x["finished"] == 40 and 0 < x["utilization"] <= 1
