"""The Gavel policies' direct HiGHS calls give linprog's solutions exactly, and the round
mechanism's priorities are those of `priorities` (the speed-ups change no result)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

from scipy.optimize import linprog

from gpucluster.sim.rounds import allocation, load_all, lp
from gpucluster.sim.rounds.allocation import LP_OPTIONS, Problem, solve_lp
from gpucluster.sim.rounds.mechanism import assign, priorities

LP_POLICIES = ["max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf",
               "finish_time_fairness", "throughput_per_dollar_perf"]


def _problem(rng: np.random.Generator) -> Problem:
    m, K = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    # few distinct rows (as in a trace: a handful of models), some types infeasible
    kinds = rng.random((int(rng.integers(1, 6)), K)) * (rng.random((1, K)) < 0.9)
    T = kinds[rng.integers(0, len(kinds), m)]
    scale = rng.choice([1, 1, 1, 2, 4, 8], m)
    cap = rng.integers(1, 12, K)
    return Problem(np.arange(m), T, scale, cap, rng.random(K) + 0.1, rng.random(m) * 1e5, rng.random(m) * 1e5)


def test_fast_path_is_used_with_this_scipy():
    assert allocation.highs_core() is not None


def test_solve_lp_equals_linprog_on_random_lps():
    rng = np.random.default_rng(7)
    for _ in range(300):
        m, n = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        A = rng.random((m, n)) * (rng.random((m, n)) < 0.4)
        b = rng.random(m) * 3 - (rng.random(m) < 0.1)           # some infeasible ones
        c = -rng.random(n)
        bounds = np.zeros((n, 2))
        bounds[:, 1] = np.where(rng.random(n) < 0.2, np.inf, 1.0)
        ref = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs", options=LP_OPTIONS)
        x = solve_lp(c, A, b, bounds)
        assert (ref.status == 0) == (x is not None)
        if x is not None:
            np.testing.assert_allclose(x, ref.x, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", LP_POLICIES)
def test_allocations_equal_linprogs(name, monkeypatch):
    rng = np.random.default_rng(11)
    probs = [_problem(rng) for _ in range(40)]
    fast = [load_all().get(name)().allocate(p) for p in probs]
    monkeypatch.setattr(lp, "_HIGHS", [None, None])    # force the linprog path
    for p, got in zip(probs, fast, strict=True):
        ref = load_all().get(name)().allocate(p)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)


def _assign_reference(X, received_s, since_reset_s, scale, capacity, service):
    """The mechanism as first written: priorities over the whole matrix."""
    m, K = X.shape
    out = np.full(m, -1, dtype=np.int64)
    flat = priorities(X, received_s, since_reset_s).ravel()
    pos = np.flatnonzero(flat > 0)
    if len(pos) == 0:
        return out
    jobs = pos // K
    order = pos[np.lexsort((jobs, service[jobs], -flat[pos]))]
    left = [int(c) for c in capacity]
    for p in order.tolist():
        j, k = divmod(p, K)
        if out[j] < 0 and scale[j] <= left[k]:
            out[j] = k
            left[k] -= int(scale[j])
    return out


def test_assign_equals_the_reference_mechanism():
    rng = np.random.default_rng(3)
    for _ in range(500):
        m, K = int(rng.integers(1, 30)), int(rng.integers(1, 4))
        X = rng.random((m, K)) * (rng.random((m, K)) < 0.6)
        X = np.round(X / np.maximum(X.sum(axis=1, keepdims=True), 1), 2)   # ties happen
        since = float(rng.choice([0.0, 360.0, 720.0, 3600.0]))
        rec = rng.choice([0.0, 360.0, 720.0], (m, K)) * (since > 0)
        scale = rng.choice([1, 1, 2, 4, 8], m)
        cap = rng.integers(0, 10, K)
        svc = np.round(rng.random(m), 1)
        got = assign(X, rec, since, scale, cap, svc)
        assert got.tolist() == _assign_reference(X, rec, since, scale, cap, svc).tolist()
