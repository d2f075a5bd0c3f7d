"""A real Slurm 22.05 (slurmctld, two slurmd with 8 fake H200 each, slurmdbd + MariaDB) with two
partitions of different time limits: jobs that wait for a 16-GPU job, one exiting 3, one killed at
its time limit. `slurm import` takes the history; the reader keeps partition, QOS, account, state,
exit code, time limit and the recorded wait (Start - Eligible); `simulate` replays it (a TIMEOUT
job ends at its limit) and prints simulated against recorded waits per partition."""

from __future__ import annotations

import json
import sys
from datetime import datetime

import pytest

from slurm_cluster import SlurmCluster, why_not
from tests_cli_helpers import EXE, ROOT

_why = why_not(accounting=True)
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

PARTITIONS = ("PartitionName=short Nodes=gpu[01-02] Default=YES MaxTime=00:10:00 State=UP\n"
              "PartitionName=long Nodes=gpu[01-02] MaxTime=02:00:00 State=UP")
JOBS = [  # (name, sbatch options, command)
    ("wide", ["-p", "short", "-N", "2", "--gres=gpu:h200:8", "--time=2:00"], "sleep 4"),
    ("after", ["-p", "long", "-A", "research", "--gres=gpu:h200:8", "--time=30:00"], "sleep 2"),
    ("fails", ["-p", "short", "-A", "research", "--gres=gpu:h200:4", "--time=5:00"], "sleep 1; exit 3"),
    ("slow", ["-p", "short", "--gres=gpu:h200:2", "--time=1"], "sleep 600"),   # killed at 1 minute: TIMEOUT
]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("slurm-replay"), accounting=True, partitions=PARTITIONS) as c:
        yield c


def gpc(slurm, *args, timeout=240):
    import subprocess
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=slurm.root)


@pytest.fixture(scope="module")
def history(slurm, tmp_path_factory):
    for name, opts, cmd in JOBS:
        slurm.run(["sbatch", f"--job-name={name}", *opts, "--wrap", cmd])
    slurm.wait_accounted(len(JOBS))
    d = tmp_path_factory.mktemp("replay")
    trace, scen = d / "sacct.txt", d / "replay.yaml"
    p = gpc(slurm, "slurm", "import", "-o", str(trace), "--scenario", str(scen), "--cluster",
            str(ROOT / "tests/integration/data/slurm-2node.yaml"), "--json")
    assert p.returncode == 0, p.stderr
    lines = trace.read_text().splitlines()
    head = lines[0].split("|")
    rows = {r["JobName"]: r for r in (dict(zip(head, ln.split("|"), strict=True)) for ln in lines[1:])}
    return json.loads(p.stdout), trace, scen, rows


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_partition_state_limit_and_recorded_wait_survive_the_import(history):
    rep, trace, _, rows = history
    from gpucluster.sim.traces.sacct import read_sacct
    assert set(rows) == {n for n, _, _ in JOBS} and rep["jobs"] == len(JOBS)
    assert rows["slow"]["State"] == "TIMEOUT" and rows["fails"]["State"] == "FAILED"
    jobs = {r["JobName"]: j for r in rows.values() for j in read_sacct(str(trace)).jobs if j.name == r["JobID"]}
    assert {n: j.partition for n, j in jobs.items()} == {"wide": "short", "after": "long", "fails": "short",
                                                        "slow": "short"}
    assert {n: j.time_limit_s for n, j in jobs.items()} == {"wide": 120, "after": 1800, "fails": 300, "slow": 60}
    assert jobs["fails"].state == "FAILED" and jobs["fails"].exit_code == 3 and jobs["fails"].final_state == "failed"
    assert jobs["slow"].state == "TIMEOUT" and jobs["slow"].duration >= 60
    assert jobs["wide"].gpus == 16 and jobs["wide"].nodes == 2 and jobs["after"].gpus == 8
    assert all(j.qos == "normal" for j in jobs.values())
    assert {n: j.account for n, j in jobs.items()} == {"wide": "root", "after": "research", "fails": "research",
                                                      "slow": "root"}
    for name, j in jobs.items():      # the recorded wait is the export's Start - Eligible
        r = rows[name]
        assert j.wait_s == _t(r["Start"]) - _t(r["Eligible"]) >= 0
    # the 16-GPU job held every GPU: the jobs behind it started when it ended
    for name in ("after", "fails", "slow"):
        assert _t(rows[name]["Start"]) >= _t(rows["wide"]["End"])
    assert rep["replay_states"] == {"completed": 2, "failed": 2} and rep["partitions"] == {"short": 3, "long": 1}


def test_the_replay_prints_simulated_against_recorded_waits(history):
    _, _, scen, rows = history
    s = _simulate_json(scen)
    assert s["jobs"]["total"] == 4 and s["jobs"]["failed"] == 2 and s["jobs"]["completed"] == 2
    assert any("timeout" in why for why in s["jobs"]["not_run"])          # the TIMEOUT job ends at its limit
    cal = s["recorded_waits"]
    assert set(cal["partitions"]) == {"short", "long"} and cal["all"]["compared"] == 4
    for part in ("short", "long"):
        got = cal["partitions"][part]
        names = [n for n, r in rows.items() if r["Partition"] == part]
        recorded = sorted(_t(rows[n]["Start"]) - _t(rows[n]["Eligible"]) for n in names)
        assert got["jobs"] == len(names) and got["recorded_s"]["p90"] <= recorded[-1]
        assert got["simulated_s"]["p50"] >= 0
    print(f"replayed waits {json.dumps(cal['partitions'])}", file=sys.stderr)   # for docs, never asserted
    out = _cli(scen, "run")
    assert "Waits, simulated vs recorded" in out
    table = [ln for ln in out.splitlines() if ln.startswith(("│ short", "│ long"))]
    assert len(table) == 2
    both = _cli(scen, "compare", "--policies", "backfill,multifactor")
    assert "wait p50, all partitions: simulated (recorded)" in both


def _cli(scen, *args: str, json_out: bool = False) -> str:
    import os
    import subprocess
    argv = [str(EXE), "simulate", args[0], str(scen), *args[1:], *(["--json"] if json_out else [])]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    return p.stdout


def _simulate_json(scen) -> dict:
    return json.loads(_cli(scen, "run", json_out=True))
