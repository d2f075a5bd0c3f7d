"""Gavel's round-based policies: invariants under random workloads, LP optimality, the two
drivers (array engine, event simulator) agreeing, and `gpucluster simulate` with them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import check_now, gavel_small_scenario, pending_or_running_are_reported, watch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_invariants import scenarios   # the event simulator's random scenarios

from gpucluster.errors import UserError
from gpucluster.sim.metrics import gpu_time
from gpucluster.sim.run import build

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

from gpucluster.sim.rounds import load_all
from gpucluster.sim.rounds.allocation import Problem
from gpucluster.sim.rounds.engine import run_rounds
from gpucluster.sim.rounds.mechanism import assign

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "gpucluster"      # the console script, as a user runs it
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
POLICIES = ["fifo", "fifo_perf", "max_min_fairness", "max_min_fairness_perf", "finish_time_fairness",
            "finish_time_fairness_perf", "throughput_per_dollar_perf"]
LP_POLICIES = [p for p in POLICIES if not p.startswith("fifo")]


@st.composite
def workloads(draw):
    K = draw(st.integers(1, 3))
    cap = np.array(draw(st.lists(st.integers(1, 6), min_size=K, max_size=K)))
    n = draw(st.integers(1, 14))
    arrival = np.array(draw(st.lists(st.floats(0, 20_000), min_size=n, max_size=n)))
    scale = np.array(draw(st.lists(st.sampled_from([1, 1, 2, 4, 8]), min_size=n, max_size=n)))
    scale = np.minimum(scale, int(cap.max()))      # every job fits on some type
    T = np.array(draw(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0]), min_size=K, max_size=K),
                               min_size=n, max_size=n)))
    fits = scale[:, None] <= cap[None, :]
    T[~(T * fits).any(axis=1), int(np.argmax(cap))] = 1.0    # and runs on it
    steps = np.array(draw(st.lists(st.floats(10, 50_000), min_size=n, max_size=n)))
    switch = draw(st.sampled_from([0.0, 30.0]))
    return arrival, scale, steps, T, cap, switch


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads())
def test_round_invariants(policy, w):
    arrival, scale, steps, T, cap, switch = w
    seen = {"rounds": 0}

    def check(X, asg, sc, capacity):
        seen["rounds"] += 1
        assert np.all(X >= 0) and np.all(X.sum(axis=1) <= 1 + 1e-9)          # rows are time fractions
        if policy in LP_POLICIES:                                            # no type over-allocated
            assert np.all((sc[:, None] * X).sum(axis=0) <= capacity + 1e-6)
        for k in range(len(capacity)):                                       # no GPU given twice
            assert sc[asg == k].sum() <= capacity[k]

    res = run_rounds(arrival, scale, steps, T, cap, load_all().get(policy)(seed=1), round_s=360.0,
                     switch_s=switch, prices=np.linspace(1.0, 3.0, len(cap)), check=check)
    assert res.finished.all()                                                # every job finishes
    best = np.array([max(T[j][(T[j] > 0) & (scale[j] <= cap)]) for j in range(len(T))])
    worst = np.array([min(T[j][(T[j] > 0) & (scale[j] <= cap)]) for j in range(len(T))])
    assert np.all(res.jct_s >= steps / best - 1e-6)                           # never faster than its best type
    assert np.all(res.end_s >= arrival)
    # work conserved: GPU time held is between all work on the fastest and on the slowest types
    # (plus at most one switch per round a job ran)
    lo = float((scale * steps / best).sum())
    hi = float((scale * steps / worst).sum()) + switch * float(scale.sum()) * res.rounds
    assert lo - 1e-6 <= res.busy_gpu_s <= hi + 1e-6
    assert 0 < res.utilization <= 1 + 1e-9


def test_max_min_perf_is_optimal_and_beats_agnostic_on_skewed_speeds():
    # two job kinds, each 10x faster on a different type: the aware policy sends each home
    T = np.array([[10.0, 1.0], [10.0, 1.0], [1.0, 10.0], [1.0, 10.0]])
    p = Problem(np.arange(4), T, np.ones(4, dtype=np.int64), np.array([2, 2]))
    X = load_all().get("max_min_fairness_perf")().allocate(p)
    assert np.allclose(X, [[1, 0], [1, 0], [0, 1], [0, 1]], atol=1e-6)
    Xa = load_all().get("max_min_fairness")().allocate(p)
    assert np.allclose(Xa, 0.5, atol=1e-6)                  # agnostic: an even split of time
    thr = (T * X).sum(axis=1)
    assert np.all(thr > (T * Xa).sum(axis=1))


def test_max_min_equalises_gpu_time_across_scale_factors():
    # one 1-GPU and one 4-GPU job on 4 GPUs: LAS gives equal GPU-time, so 4 x_big = x_small
    p = Problem(np.arange(2), np.ones((2, 1)), np.array([1, 4]), np.array([4]))
    X = load_all().get("max_min_fairness")().allocate(p)
    assert X[0, 0] * 1 == pytest.approx(4 * X[1, 0], rel=1e-6) or X[0, 0] == pytest.approx(1.0)
    assert (np.array([1, 4]) * X[:, 0]).sum() <= 4 + 1e-9


def test_mechanism_prefers_jobs_behind_their_share():
    X = np.array([[0.5], [0.5]])
    got = assign(X, np.array([[360.0], [0.0]]), 360.0, np.array([1, 1]), np.array([1]), np.zeros(2))
    assert got.tolist() == [-1, 0]


def test_fifo_perf_blocks_at_the_head_and_picks_the_fastest_type():
    T = np.array([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
    p = Problem(np.arange(3), T, np.array([1, 4, 1]), np.array([2, 2]))
    X = load_all().get("fifo_perf")().allocate(p)
    assert X.tolist() == [[0, 1], [0, 0], [0, 0]]         # the 4-GPU job fits nowhere: it blocks the third


def _small_trace():
    from gpucluster.sim.traces.gavel import read_gavel
    got = read_gavel(str(DATA / "gavel_small.trace"), throughputs=str(DATA / "gavel_throughputs_2019_sample.json"))
    gpus = ["v100", "p100", "k80"]
    return got.jobs, gpus


@pytest.mark.parametrize("policy, sim_name", [("max_min_fairness_perf", "max_min_fairness_perf"),
                                              ("fifo_perf", "fifo_perf"),
                                              ("fifo_gavel_code", "gavel_fifo_code")])
def test_event_simulator_agrees_with_the_array_engine(tmp_path, policy, sim_name):
    jobs, gpus = _small_trace()
    alloc = load_all().get(policy)(seed=0)
    if hasattr(alloc, "type_names"):      # fifo_gavel_code orders types by name, as the event simulator's
        alloc.type_names = gpus
    res = run_rounds(np.array([j.submit for j in jobs]), np.array([j.gpus for j in jobs]),
                     np.array([j.steps for j in jobs]), np.array([[j.speeds[g] for g in gpus] for j in jobs]),
                     np.array([4, 4, 4]), alloc)
    out = _simulate(tmp_path, sim_name)
    assert out["jobs"]["completed"] == len(jobs)
    assert out["makespan_s"] == pytest.approx(res.makespan_s, rel=1e-6)
    assert out["classes"]["philly"]["jct_s"]["mean"] == pytest.approx(float(res.jct_s.mean()), rel=1e-6)


def _scenario(tmp_path: Path, policy: str) -> Path:
    return gavel_small_scenario(tmp_path / "gavel.yaml", policy)


def _simulate(tmp_path: Path, policy: str) -> dict:
    r = subprocess.run([str(EXE), "simulate", str(_scenario(tmp_path, policy)), "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_cli_simulate_with_a_gavel_policy(tmp_path):
    out = _simulate(tmp_path, "max_min_fairness_perf")
    assert out["policy"] == "max_min_fairness_perf" and not out["partial"]
    assert out["jobs"]["completed"] == out["jobs"]["total"] == 40


def test_cli_bad_throughput_table_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    scen = _scenario(tmp_path, "fifo_perf")
    scen.write_text(scen.read_text().replace(str(DATA / "gavel_throughputs_2019_sample.json"), str(bad)))
    r = subprocess.run([str(EXE), "simulate", str(scen)], capture_output=True, text=True, cwd=ROOT, env=ENV,
                       timeout=120)
    assert r.returncode == 2
    assert "not JSON" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


SIM_POLICIES = ["max_min_fairness_perf", "max_min_fairness", "fifo_perf", "gavel_fifo", "gavel_fifo_code",
                "finish_time_fairness_perf",
                "finish_time_fairness", "throughput_per_dollar_perf"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_policies_keep_the_simulators_invariants(data):
    # the event simulator's own random scenarios (2 GPU types, gangs, GPU-sharing pods, failures,
    # services, horizons), run under a round-based policy with every check after every event
    loaded = data.draw(scenarios())
    policy = data.draw(st.sampled_from(SIM_POLICIES))
    try:
        sim = build(loaded, policy=policy, policy_field="policy")
    except UserError as exc:
        assume("no jobs" not in exc.reason)
        raise
    watch(sim)
    sim.run()
    check_now(sim)
    s = sim.state
    assert math.isclose(s.alloc_gpu_s + s.idle_gpu_s + s.down_gpu_s, s.capacity_gpu_s, rel_tol=1e-9, abs_tol=1e-6)
    gt = gpu_time(list(sim.by_id.values()))
    used = sum(v for k, v in gt.items() if k not in ("busy", "work"))   # every use, restarts of both kinds
    assert math.isclose(used, s.alloc_gpu_s, rel_tol=1e-6, abs_tol=1e-3)
    pending_or_running_are_reported(sim)
    if loaded.spec.horizon_days is None and not any(w.kind == "inference" for w in loaded.spec.workloads):
        assert not sim.partial
        for j in sim.by_id.values():   # every job ends (or is reported as never able to start)
            assert j.state in ("completed", "failed", "cancelled") or j.reason, (j, j.reason)


def test_benchmark_interface_prints_one_json_object_per_trace_and_policy():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_gavel.py"), "--trace", str(DATA / "gavel_small.trace"),
                        "--throughputs", str(DATA / "gavel_throughputs_2019_sample.json"), "--cluster", "4:4:4",
                        "--policies", "fifo,max_min_fairness_perf", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["policy"] for x in rows] == ["fifo", "max_min_fairness_perf"]
    for x in rows:
        assert {"trace", "policy", "jobs", "mean_jct_h", "makespan_h", "utilization", "cpu_s"} <= set(x)
        assert x["trace"] == "gavel_small" and x["jobs"] == x["finished"] == 40
        assert 0 < x["utilization"] <= 1 and x["makespan_h"] > 0
