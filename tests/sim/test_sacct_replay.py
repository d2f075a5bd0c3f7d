"""Replaying a Slurm history: backfill planned with time limits or real run times, jobs killed at
their time limit, and simulated against recorded waits per partition (terminal, JSON, HTML)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from gpucluster.sim.jobs import COMPLETED, FAILED, Job
from gpucluster.sim.kernel import Kernel
from gpucluster.sim.policies import load_all
from gpucluster.sim.run import simulate
from gpucluster.sim.simulator import SimConfig, Simulation
from gpucluster.sim.state import ClusterState, NodeInfo
from helpers import pool, scenario, watch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from tests_cli_helpers import run

HEADER = "JobID|Partition|Submit|Eligible|Start|End|Timelimit|State|ExitCode|AllocTRES"


def at(minutes: float) -> str:
    return (datetime(2024, 5, 1) + timedelta(minutes=minutes)).isoformat()


def sacct(tmp_path: Path, rows: list[tuple], name: str = "sacct.txt") -> str:
    """rows: (id, partition, submit min, recorded wait min, run min, limit, state, gpus)."""
    lines = [HEADER]
    for jid, part, sub, wait, runm, limit, state, gpus in rows:
        lines.append(f"{jid}|{part}|{at(sub)}|{at(sub)}|{at(sub + wait)}|{at(sub + wait + runm)}|{limit}|{state}|"
                     f"{'3:0' if state == 'FAILED' else '0:0'}|gres/gpu={gpus}")
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def replay(tmp_path, rows, policy="backfill", nodes=1, **options):
    w = [{"kind": "trace", "name": "h", "format": "sacct", "path": sacct(tmp_path, rows)}]
    res = simulate(scenario(w, policy=policy, policy_options=options, pools=[pool("a", "H100", nodes, 8)]))
    jobs = sorted(res.jobs, key=lambda j: j.seq)
    return {r[0]: j for r, j in zip(rows, jobs, strict=True)}, res


# A holds 4 of 8 GPUs for 60 min (limit 2 h); B, the head, needs all 8; C needs 4 for 30 min but
# asks for 4 h. With real run times C ends before A frees B's GPUs: it backfills. Slurm plans with
# limits: C would end after A's limit (120 min), so it waits behind B.
LIMITS = [("A", "gpu", 0, 0, 60, "02:00:00", "COMPLETED", 4),
          ("B", "gpu", 1, 0, 60, "02:00:00", "COMPLETED", 8),
          ("C", "gpu", 2, 0, 30, "04:00:00", "COMPLETED", 4)]


def test_a_job_that_fits_only_under_the_real_run_time(tmp_path):
    real, _ = replay(tmp_path, LIMITS, estimate="runtime")
    assert real["C"].first_start == 2 * 60 and real["B"].first_start == 60 * 60
    slurm, _ = replay(tmp_path, LIMITS)                      # the default: limits, as Slurm
    assert slurm["C"].first_start == 120 * 60 and slurm["B"].first_start == 60 * 60
    same, _ = replay(tmp_path, LIMITS, estimate="limit")
    assert same["C"].first_start == slurm["C"].first_start
    assert all(j.state == COMPLETED for j in {**real, **slurm}.values())


def test_a_short_limit_backfills_under_both(tmp_path):
    rows = LIMITS[:2] + [("C", "gpu", 2, 0, 30, "00:45:00", "COMPLETED", 4)]   # 2 + 45 < 120
    slurm, _ = replay(tmp_path, rows)
    assert slurm["C"].first_start == 2 * 60 and slurm["B"].first_start == 60 * 60


def test_limits_never_delay_the_head_past_its_reservation(tmp_path):
    # many small fillers with random limits. With real run times B (the head) starts when A ends; with
    # limits its reservation is A's start + limit (120 min): fillers that end before it may run, so B
    # starts when the GPUs are really free, never after 120 min (what Slurm promises)
    rng = np.random.default_rng(3)
    rows = LIMITS[:2] + [(f"f{i}", "gpu", 2 + i, 0, int(rng.integers(5, 50)), f"00:{int(rng.integers(10, 59)):02d}:00",
                          "COMPLETED", int(rng.choice([1, 2, 4]))) for i in range(20)]
    for est in ("limit", "runtime"):
        got, res = replay(tmp_path, rows, estimate=est)
        if est == "runtime":
            assert got["B"].first_start == 60 * 60
        else:
            assert 60 * 60 <= got["B"].first_start <= 120 * 60
        assert res.summary["jobs"]["completed"] == len(rows)


def _direct(jobs: list[Job], policy: str = "backfill") -> Simulation:
    st = ClusterState([NodeInfo("n0", "a", "H100-SXM5-80GB", 8)])
    sim = Simulation(st, jobs, load_all().get(policy)(), Kernel(0), SimConfig())
    watch(sim)
    sim.run()
    return sim


def test_a_job_reaching_its_time_limit_ends_there_as_timeout():
    over = Job(id=0, cls="c", kind="batch", gpus=8, submit=0.0, work=1000.0, time_limit_s=100.0, seq=0)
    fits = Job(id=1, cls="c", kind="batch", gpus=8, submit=0.0, work=50.0, time_limit_s=100.0, seq=1)
    sim = _direct([over, fits])
    assert over.state == FAILED and over.end == 100.0 and over.reason.startswith("timeout")
    assert fits.state == COMPLETED and fits.first_start == 100.0 and fits.end == 150.0
    st = sim.state
    held = sum(j.useful_gpu_s + j.ckpt_gpu_s + j.restart_gpu_s + j.lost_gpu_s + j.preempt_lost_gpu_s
               for j in (over, fits))
    assert held == pytest.approx(st.alloc_gpu_s) == pytest.approx(8 * 150.0)


def test_recorded_timeout_and_failure_replay_as_failed(tmp_path):
    rows = [("t", "gpu", 0, 0, 30, "00:30:00", "TIMEOUT", 8), ("f", "gpu", 0, 0, 10, "01:00:00", "FAILED", 8),
            ("ok", "gpu", 0, 0, 10, "00:05:00", "COMPLETED", 8)]     # over its limit: Slurm's grace, not a timeout
    got, res = replay(tmp_path, rows)
    assert got["t"].state == FAILED and got["t"].end - got["t"].first_start == 30 * 60
    assert got["f"].state == FAILED and got["f"].reason == "recorded FAILED"
    assert got["ok"].state == COMPLETED
    assert res.summary["jobs"]["failed"] == 2


def test_generated_workloads_are_planned_as_before():
    w = [{"kind": "training", "name": "t", "arrivals": {"process": "poisson", "per_day": 150},
          "gpus": [1, 2, 4, 8, 16], "duration_hours": {"dist": "exponential", "mean": 2}}]
    a = simulate(scenario(w, policy="backfill", horizon_days=2, seed=4)).summary
    b = simulate(scenario(w, policy="backfill", horizon_days=2, seed=4, policy_options={"estimate": "runtime"})).summary
    assert a["classes"] == b["classes"] and "recorded_waits" not in a


# -- simulated against recorded waits --------------------------------------------------

def test_a_fifo_history_replayed_under_fifo_reproduces_its_waits(tmp_path):
    # recorded on an 8-GPU FIFO cluster: X runs 0-60, Y waits 50 min, Z waits 100 min
    rows = [("X", "p1", 0, 0, 60, "02:00:00", "COMPLETED", 8), ("Y", "p1", 10, 50, 60, "02:00:00", "COMPLETED", 8),
            ("Z", "p2", 20, 100, 30, "01:00:00", "COMPLETED", 8)]
    _, res = replay(tmp_path, rows, policy="fifo")
    cal = res.summary["recorded_waits"]
    p1, p2 = cal["partitions"]["p1"], cal["partitions"]["p2"]
    assert p1["recorded_s"]["p50"] == p1["simulated_s"]["p50"] == 25 * 60     # median of 0 and 50 min
    assert p1["recorded_s"]["p90"] == pytest.approx(45 * 60)                  # 0 + 0.9 x 50 min
    assert p2["simulated_s"]["p50"] == p2["recorded_s"]["p50"] == 100 * 60
    assert p1["p50_error_s"] == 0 and cal["all"]["median_abs_error_s"] == 0 and cal["all"]["compared"] == 3


def test_the_comparison_counts_jobs_the_twin_never_started(tmp_path):
    # recorded waits 0, 1, 2, 10 min in p1; the twin (2 nodes) starts them all at once; a 64-GPU job
    # of p2 cannot run on it at all
    rows = [(f"j{i}", "p1", i, w, 30, "01:00:00", "COMPLETED", 4) for i, w in enumerate([0, 1, 2, 10])]
    rows.append(("big", "p2", 5, 3, 30, "01:00:00", "COMPLETED", 64))
    _, res = replay(tmp_path, rows, nodes=2)
    cal = res.summary["recorded_waits"]
    p1 = cal["partitions"]["p1"]
    assert p1["recorded_s"]["p50"] == 90 and p1["recorded_s"]["p90"] == pytest.approx(60 * (2 + 0.7 * 8))
    assert p1["simulated_s"]["p90"] == 0 and p1["p90_error_s"] == pytest.approx(-60 * 7.6)
    p2 = cal["partitions"]["p2"]
    assert (p2["jobs"], p2["compared"], p2["not_started"]) == (1, 0, 1) and p2["recorded_s"]["p50"] is None
    assert cal["all"]["jobs"] == 5 and cal["all"]["not_started"] == 1


def _scenario_file(tmp_path: Path, policy: str = "backfill") -> Path:
    trace = sacct(tmp_path, [("X", "short", 0, 0, 60, "02:00:00", "COMPLETED", 8),
                             ("Y", "long", 10, 50, 60, "1-00:00:00", "FAILED", 8),
                             ("Z", "short", 20, 100, 30, "01:00:00", "COMPLETED", 8)])
    p = tmp_path / "replay.yaml"
    p.write_text(f"name: replay\npolicy: {policy}\ncluster:\n  name: c\n  node_pools:\n"
                 "    - {name: a, count: 1, gpu: H100, gpus_per_node: 8, cpu_cores: 64, ram_gib: 1024, "
                 "nics_per_node: 1, nic: NDR400}\n"
                 "  fabric: {topology: fat-tree, switch: QM9700}\n"
                 f"workloads:\n  - {{kind: trace, name: sacct, format: sacct, path: {trace}}}\n")
    return p


def test_cli_prints_the_comparison_in_the_terminal_json_and_html(tmp_path):
    scen = _scenario_file(tmp_path)
    s = json.loads(run("simulate", "run", str(scen), "--json", check_rc=0).stdout)
    parts = s["recorded_waits"]["partitions"]
    assert set(parts) == {"short", "long"} and parts["long"]["recorded_s"]["p50"] == 50 * 60
    assert s["jobs"]["failed"] == 1
    from gpucluster.documents.simulation import SimulationDocument
    waits = SimulationDocument.model_validate(s).recorded_waits
    assert waits is not None and waits["all"]["compared"] == 3
    out = run("simulate", "run", str(scen), "--html", str(tmp_path / "r.html"), check_rc=0).stdout
    assert "simulated vs recorded" in out and "recorded p90" in out
    assert any(ln.lstrip("│ ").startswith("long") for ln in out.splitlines())
    assert "Waits, simulated vs recorded" in (tmp_path / "r.html").read_text()
    cmp = run("simulate", "compare", str(scen), "--policies", "fifo,multifactor", check_rc=0).stdout
    assert "wait p50, all partitions: simulated (recorded)" in cmp


def test_policies_list_the_estimate_and_slurm_weights():
    out = json.loads(run("simulate", "policies", "--json", check_rc=0).stdout)
    assert "PriorityWeightFairshare" in out["multifactor"]["options"]
    assert "limit" in out["backfill"]["options"]["estimate"]


def test_a_bad_estimate_is_one_line(tmp_path):
    scen = _scenario_file(tmp_path)
    scen.write_text(scen.read_text() + "policy_options: {estimate: oracle}\n")
    p = run("simulate", "run", str(scen))
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "estimate" in p.stderr and "limit, runtime" in p.stderr


# -- a history the twin made itself ----------------------------------------------------

def test_a_history_replayed_under_the_policy_that_made_it_matches_and_others_do_not(tmp_path):
    from gpucluster.sim.run import build
    from gpucluster.sim.traces.sacct import read_sacct, write_sacct

    def account(name, per_day, mean_h):
        return {"kind": "training", "name": name, "queue": name, "gpus": [1, 2, 4, 8, 16],
                "arrivals": {"process": "poisson", "per_day": per_day, "count": 60},
                "duration_hours": {"dist": "exponential", "mean": mean_h}}
    mf = {"PriorityWeightFairshare": 10000, "PriorityWeightAge": 1000, "PriorityDecayHalfLife": "1-0"}
    sim = build(scenario([account("a", 24, 2), account("b", 12, 4)], policy="multifactor", policy_options=mf,
                         pools=[pool("p", "H100", 2)], seed=5))
    for j in sim.jobs:
        j.time_limit_s = float(int(j.work * 2 / 900 + 1) * 900)
    sim.run()
    path = str(tmp_path / "h.txt")
    assert write_sacct(list(sim.by_id.values()), path) == 120
    back = read_sacct(path)
    assert len(back.jobs) == 120 and not back.bad and {j.account for j in back.jobs} == {"a", "b"}
    w = [{"kind": "trace", "name": "h", "format": "sacct", "path": path}]
    err = {}
    for name, pol, opts in (("same", "multifactor", mf), ("backfill", "backfill", {}), ("fifo", "fifo", {})):
        s = simulate(scenario(w, policy=pol, policy_options=opts, pools=[pool("p", "H100", 2)])).summary
        err[name] = s["recorded_waits"]["all"]["mean_abs_error_s"]
    assert err["same"] <= 1.0             # sacct's whole seconds, nothing else
    assert err["backfill"] > 60 and err["fifo"] > 60


def test_written_states_read_back():
    from gpucluster.sim.traces.sacct import read_sacct, write_sacct
    over = Job(id=0, cls="c", kind="batch", gpus=8, submit=0.0, work=1000.0, time_limit_s=100.0, seq=0)
    fits = Job(id=1, cls="c", kind="batch", gpus=8, submit=0.0, work=50.0, time_limit_s=3600.0, seq=1, account="x",
               partition="p", qos="q")
    _direct([over, fits])
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "h.txt")
        write_sacct([over, fits], path)
        a, b = read_sacct(path).jobs
    assert (a.state, a.time_limit_s, a.duration, a.gpu_types) == ("TIMEOUT", 100, 100, ("H100-SXM5-80GB",))
    assert (b.state, b.account, b.partition, b.qos, b.wait_s, b.time_limit_s) == ("COMPLETED", "x", "p", "q", 100, 3600)
