"""Gavel's agnostic FIFO as its code places jobs (`fifo_gavel_code`): a completed job's type
goes to the head of the queue, then the last type, in name order, with room for the gang;
the random draw is unused, so the seed changes nothing."""

from __future__ import annotations

from pathlib import Path

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
    # v100 (last by name) until it is full, then p100, then k80 (the only type with room for the gang)
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
    summary = reg.get("gavel_fifo_code").summary
    assert "name order" in summary and "room for the gang" in summary and "completed job's type" in summary


def _p(ids: list[int], scales: list[int], cap: list[int], T: list[list[float]] | None = None) -> Problem:
    m = len(ids)
    return Problem(np.array(ids), np.array(T) if T is not None else np.ones((m, 3)),
                   np.array(scales, dtype=np.int64), np.array(cap, dtype=np.int64))


def test_a_gang_goes_where_it_fits_whole_not_where_one_gpu_is_free() -> None:
    # one V100 left: the 2-GPU gang takes p100 (the last type by name with 2 free), not v100
    X = _alloc().allocate(_p([0, 1], [1, 2], [2, 2, 2]))
    assert X.argmax(axis=1).tolist() == [0, 1]


def test_a_completed_job_hands_its_type_to_the_head_of_the_queue() -> None:
    a = _alloc()
    # job 0 cannot run on v100, so it takes k80; job 1 takes v100
    X = a.allocate(_p([0, 1], [1, 1], [1, 0, 1], [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    assert X.argmax(axis=1).tolist() == [2, 0]
    # both end; jobs 2 and 3 arrive. Visited by id, job 0's k80 goes to job 2, job 1's v100
    # to job 3 (the last type by name would have given job 2 the V100)
    X = a.allocate(_p([2, 3], [1, 1], [1, 0, 1]))
    assert X.argmax(axis=1).tolist() == [2, 0]


def test_the_free_gpus_seen_by_a_completed_job_count_only_the_jobs_visited_before_it() -> None:
    a = _alloc()
    X = a.allocate(_p([0, 1], [1, 1], [2, 0, 0]))
    assert X[:, 0].tolist() == [1.0, 1.0]
    # job 0 ends: its 2-GPU successor is placed on v100 (2 free before job 1 is counted) and
    # waits there for job 1, as Gavel's code does; no job can start on v100 meanwhile
    X = a.allocate(_p([1, 2, 3], [1, 2, 1], [2, 0, 0]))
    assert X.tolist() == [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
# Gavel's own simulator, agnostic FIFO, 36:36:36, 360 s rounds, seed 0 (../shared/traces/README.md)
GAVEL_FIFO_JCT_H = {"2869ce": 336.6, "0e4a51": 546.9}


@pytest.mark.parametrize("trace", sorted(GAVEL_FIFO_JCT_H))
def test_gavel_published_fifo_mean_jct_within_5_percent(trace: str) -> None:
    path, table = SHARED / "philly" / f"{trace}.trace", SHARED / "gavel" / "oracle_throughputs_2019.json"
    if not path.is_file() or not table.is_file():
        pytest.skip(f"../shared/traces/philly/{trace}.trace and Gavel's 2019 table are outside the repo")
    from gpucluster.sim.traces.gavel import read_gavel
    jobs = read_gavel(str(path), throughputs=str(table)).jobs
    T = np.array([[(j.speeds or {}).get(g, 0.0) for g in NAMES] for j in jobs])
    res = run_rounds(np.array([j.submit for j in jobs]), np.array([j.gpus for j in jobs], dtype=np.int64),
                     np.array([j.steps for j in jobs]), T, np.array([36, 36, 36]), _alloc())
    assert res.finished.all()
    ratio = float(res.jct_s.mean()) / 3600 / GAVEL_FIFO_JCT_H[trace]
    assert 0.95 <= ratio <= 1.05, f"{trace}: mean JCT {ratio:.3f} x Gavel's"
