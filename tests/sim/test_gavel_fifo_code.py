"""Gavel's agnostic FIFO as its code places jobs (`fifo_gavel_code`): the last type, in name
order, with a GPU not yet allocated; the random draw is unused, so the seed changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the round-based policies import scipy (pip install '.[test]')")

from gpucluster.sim.policies import load_all as load_policies
from gpucluster.sim.rounds import load_all
from gpucluster.sim.rounds.allocation import Problem
from gpucluster.sim.rounds.engine import run_rounds

NAMES = ["v100", "p100", "k80"]      # the benchmark's column order; by name k80 < p100 < v100


def _problem(scales: list[int], cap: list[int]) -> Problem:
    m = len(scales)
    return Problem(np.arange(m), np.ones((m, 3)), np.array(scales, dtype=np.int64), np.array(cap, dtype=np.int64))


def _alloc(seed: int = 0, names: list[str] | None = NAMES):
    a = load_all().get("fifo_gavel_code")(seed=seed)
    a.type_names = names
    return a


def test_new_jobs_go_to_the_last_type_by_name_with_a_free_gpu() -> None:
    X = _alloc().allocate(_problem([1, 1, 1, 1, 2], [2, 2, 2]))
    # v100 (last by name) until it is full, then p100, then k80; a 2-GPU gang takes k80 with 1 free GPU
    assert X.argmax(axis=1).tolist() == [0, 0, 1, 1, 2]


def test_the_order_is_by_name_not_by_column() -> None:
    X = _alloc(names=["k80", "v100", "p100"]).allocate(_problem([1, 1, 1], [1, 1, 1]))
    assert X.argmax(axis=1).tolist() == [1, 2, 0]


def test_the_seed_changes_nothing_where_fifo_draws_a_type() -> None:
    rng = np.random.default_rng(3)
    scales = rng.choice([1, 1, 2, 4], size=40).tolist()
    ours = {_alloc(seed).allocate(_problem(scales, [8, 8, 8])).tobytes() for seed in range(6)}
    assert len(ours) == 1
    drawn = set()
    for seed in range(6):
        a = load_all().get("fifo")(seed=seed)
        drawn.add(a.allocate(_problem(scales, [8, 8, 8])).tobytes())
    assert len(drawn) > 1            # the random reading does move with the seed


def test_a_run_is_the_same_for_every_seed() -> None:
    rng = np.random.default_rng(1)
    n = 60
    arrival = np.sort(rng.uniform(0, 20 * 3600, n))
    scale = rng.choice([1, 2, 4], size=n)
    steps = rng.uniform(1e3, 1e5, n)
    T = np.column_stack([np.full(n, 4.0), np.full(n, 2.0), np.ones(n)])
    ends = [run_rounds(arrival, scale, steps, T, np.array([4, 4, 4]), _alloc(seed)).end_s for seed in range(3)]
    assert all(np.array_equal(ends[0], e, equal_nan=True) for e in ends)


def test_the_event_simulator_offers_it() -> None:
    reg = load_policies()
    assert reg.canonical("gavel_fifo_code") == "gavel_fifo_code"
    assert reg.canonical("fifo-gavel-code") == "gavel_fifo_code"
    assert "name order" in reg.get("gavel_fifo_code").summary
