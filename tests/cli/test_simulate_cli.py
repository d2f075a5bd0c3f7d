"""`gpucluster simulate` through the real console script."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests_cli_helpers import EXE, ROOT, assert_one_line_error, run

DATA = ROOT / "tests" / "sim" / "data"
CLUSTER = ROOT / "examples" / "h100-64-ib.yaml"


def scenario(tmp_path: Path, body: str, name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(f"name: t\ncluster: {CLUSTER}\n" + body)
    return str(p)


TRAIN = """
workloads:
  - kind: training
    name: train
    arrivals: {per_day: 24, count: 40}
    gpus: [1, 8, 16]
    duration_hours: {dist: exponential, mean: 3}
"""


def test_json_summary(tmp_path):
    data = json.loads(run("simulate", scenario(tmp_path, TRAIN), "--json", check_rc=0).stdout)
    assert data["schema"] == "gpucluster-simulation/v1" and not data["partial"]
    assert data["jobs"]["completed"] == 40 and data["policy"] == "backfill"
    u = data["utilization"]
    assert abs(u["allocated_gpu_hours"] + u["idle_gpu_hours"] + u["down_gpu_hours"] - u["capacity_gpu_hours"]) < 1e-6
    for k in ("mean", "p50", "p99"):
        assert data["classes"]["train"]["jct_s"][k] > 0
    assert data["timeseries"]["allocation"]


def test_human_summary_and_flags(tmp_path):
    out = run("simulate", scenario(tmp_path, TRAIN), "--policy", "fifo", "--seed", "3", check_rc=0).stdout
    for piece in ("policy fifo, seed 3", "Utilization: allocation", "Goodput", "Per job class", "wait p99",
                  "Allocation over time", "events in"):
        assert piece in out, piece


def test_compare_side_by_side(tmp_path):
    out = run("simulate", "compare", scenario(tmp_path, TRAIN), "--policies", "fifo,backfill,sjf", check_rc=0).stdout
    for piece in ("fifo", "backfill", "sjf", "allocation", "mean wait", "makespan"):
        assert piece in out
    data = json.loads(run("simulate", "compare", scenario(tmp_path, TRAIN), "--policies", "fifo,las",
                          "--json", check_rc=0).stdout)
    assert set(data["policies"]) == {"fifo", "las"}


def test_policies_listed():
    out = run("simulate", "policies", check_rc=0).stdout
    for name in ("fifo", "backfill", "sjf", "las", "kueue", "hetero", "topo", "binpack", "fgd", "partition"):
        assert name in out


def test_unknown_policy_lists_the_valid_ones(tmp_path):
    proc = run("simulate", scenario(tmp_path, TRAIN), "--policy", "lotery")
    assert_one_line_error(proc, "--policy", "unknown policy 'lotery'", "backfill", "fifo", "kueue")
    proc = run("simulate", "compare", scenario(tmp_path, TRAIN), "--policies", "fifo,nope")
    assert_one_line_error(proc, "--policies", "unknown policy 'nope'")


def test_unknown_policy_in_the_file_names_its_line(tmp_path):
    proc = run("simulate", scenario(tmp_path, "policy: roundrobin\n" + TRAIN))
    assert_one_line_error(proc, "s.yaml:3", "policy", "unknown policy 'roundrobin'")


def test_job_larger_than_the_cluster_is_reported_not_a_hang(tmp_path):
    body = TRAIN.replace("[1, 8, 16]", "[8, 4096]")
    proc = run("simulate", scenario(tmp_path, body), check_rc=0)
    assert "not run: asks for 4096 GPUs, more than the cluster has" in proc.stdout


def test_corrupt_trace_rows_are_skipped_and_counted(tmp_path):
    body = f"""
workloads:
  - kind: trace
    name: slurm
    format: sacct
    path: {DATA / 'sacct.txt'}
"""
    data = json.loads(run("simulate", scenario(tmp_path, body), "--json", check_rc=0).stdout)
    tr = data["traces"][0]
    assert tr["bad_rows"] == 3 and tr["jobs"] == 4 and tr["skipped"]["job steps"] == 1
    out = run("simulate", scenario(tmp_path, body), check_rc=0).stdout
    assert "3 bad rows skipped" in out and "first at line" in out


def test_scenario_with_no_jobs_is_unusable_input(tmp_path):
    body = """
horizon_days: 1
workloads:
  - kind: training
    name: late
    arrivals: {per_day: 1, start_hours: 100}
    gpus: 1
    duration_hours: 1
"""
    assert_one_line_error(run("simulate", scenario(tmp_path, body)), "s.yaml", "no jobs")


def test_bad_input_is_one_line(tmp_path):
    assert_one_line_error(run("simulate", str(tmp_path / "missing.yaml")), "missing.yaml", "file not found")
    bad = scenario(tmp_path, TRAIN.replace("gpus: [1, 8, 16]", "gpus: {dist: lognormal, median: 4}"))
    assert_one_line_error(run("simulate", bad), "s.yaml:8", "gpus", "needs sigma")
    trace = scenario(tmp_path, "workloads:\n  - {kind: trace, name: x, format: helios, path: "
                     f"{DATA / 'sacct.txt'}}}\n")
    assert_one_line_error(run("simulate", trace), "format", "unknown trace format 'helios'", "sacct")
    nofile = scenario(tmp_path, "workloads:\n  - {kind: trace, name: x, format: sacct, path: nope.txt}\n")
    assert_one_line_error(run("simulate", nofile), "trace file not found")


def test_events_log_is_json_lines(tmp_path):
    log = tmp_path / "events.jsonl"
    run("simulate", scenario(tmp_path, TRAIN), "--events", str(log), check_rc=0)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = {r["event"] for r in recs}
    assert {"submit", "start", "end"} <= kinds
    assert all(recs[i]["t"] <= recs[i + 1]["t"] for i in range(len(recs) - 1))


def test_example_scenarios_run():
    for name in ("failures-256-nodes", "shared-vs-partitioned"):
        data = json.loads(run("simulate", f"examples/scenarios/{name}.yaml", "--json", check_rc=0).stdout)
        assert not data["partial"]
    f = json.loads(run("simulate", "examples/scenarios/failures-256-nodes.yaml", "--json", check_rc=0).stdout)
    assert 20 < f["failures"]["expected_cluster_mtbf_hours"] < 30   # Llama 3 rates: ~24 h at 256 nodes


def test_philly_gavel_example_runs():
    # The example reads a trace from ../shared (beside the checkout), not shipped in the repo.
    if not (ROOT.parent / "shared/traces/philly/2869ce.trace").is_file():
        pytest.skip("examples/scenarios/philly-gavel.yaml reads ../shared/traces/philly/2869ce.trace, "
                    "not beside this checkout")
    data = json.loads(run("simulate", "examples/scenarios/philly-gavel.yaml", "--json", check_rc=0).stdout)
    assert not data["partial"]


def test_ctrl_c_stops_cleanly_and_marks_results_partial(tmp_path):
    body = """
horizon_days: 3650
workloads:
  - kind: batch
    name: many
    arrivals: {per_day: 100}
    tasks: 1
    task_hours: 1
"""
    env = {**os.environ, "NO_COLOR": "1"}
    log = tmp_path / "events.jsonl"
    proc = subprocess.Popen([str(EXE), "simulate", scenario(tmp_path, body), "--json", "--events", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.time() + 60
    def written() -> int:   # events go to a temporary file beside the log until the run ends
        return sum(p.stat().st_size for p in tmp_path.glob(".events.jsonl.*.tmp"))
    while time.time() < deadline and written() < 100_000:
        time.sleep(0.1)   # wait until events flow: the run has started
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err     # interrupted, as `plan` exits; the partial result printed first
    data = json.loads(out)
    assert data["partial"] is True and data["simulated_days"] < 3650
