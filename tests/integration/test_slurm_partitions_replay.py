"""A real Slurm 22.05 (slurmctld, two slurmd with 8 fake H200 each, slurmdbd + MariaDB) with two
partitions over different node sets and tiers: `debug` on gpu01 alone with PriorityTier 2, `batch`
on gpu[01-02] with PriorityTier 1. Four jobs become eligible together (submitted held, released at
once): in submission order two 16-GPU batch jobs, then an 8-GPU and a 4-GPU debug job. Slurm starts
the debug jobs first (tier) and one after the other on gpu01 while gpu02 idles (node set), the
batch jobs after them. `slurm import` reads the partitions from scontrol; the replay reproduces
that order, and its per-job waits are closer to the recorded ones than a replay without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest
import yaml

from slurm_cluster import SlurmCluster, why_not
from tests_cli_helpers import EXE, ROOT

_why = why_not(accounting=True)
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

PARTITIONS = ("PartitionName=debug Nodes=gpu01 PriorityTier=2 MaxTime=00:10:00 State=UP\n"
              "PartitionName=batch Nodes=gpu[01-02] Default=YES PriorityTier=1 MaxTime=00:10:00 State=UP")
JOBS = [  # (name, sbatch options, command), submitted in this order
    ("wide", ["-p", "batch", "-N", "2", "--gres=gpu:h200:8", "--time=2"], "sleep 8"),
    ("wide2", ["-p", "batch", "-N", "2", "--gres=gpu:h200:8", "--time=2"], "sleep 4"),
    ("dbg8", ["-p", "debug", "--gres=gpu:h200:8", "--time=2"], "sleep 4"),
    ("dbg4", ["-p", "debug", "--gres=gpu:h200:4", "--time=2"], "sleep 2"),
]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("slurm-parts"), accounting=True, partitions=PARTITIONS) as c:
        yield c


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@pytest.fixture(scope="module")
def history(slurm, tmp_path_factory):
    ids = [slurm.run(["sbatch", "--parsable", "--hold", f"--job-name={name}", *opts, "--wrap", cmd]).stdout.strip()
           for name, opts, cmd in JOBS]
    slurm.run(["scontrol", "release", ",".join(i.split(";")[0] for i in ids)])   # eligible together
    slurm.wait_accounted(len(JOBS))
    d = tmp_path_factory.mktemp("replay-parts")
    trace, scen = d / "sacct.txt", d / "replay.yaml"
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200"}
    p = subprocess.run([str(EXE), "slurm", "import", "-o", str(trace), "--scenario", str(scen), "--cluster",
                        str(ROOT / "tests/integration/data/slurm-2node.yaml"), "--json"],
                       capture_output=True, text=True, env=env, timeout=240, cwd=slurm.root)
    assert p.returncode == 0, p.stderr
    lines = trace.read_text().splitlines()
    head = lines[0].split("|")
    rows = {r["JobName"]: r for r in (dict(zip(head, ln.split("|"), strict=True)) for ln in lines[1:])}
    nodes = slurm.run(["sacct", "-a", "-X", "-P", "-n", "-o", "JobName,NodeList"], check=False).stdout
    for ln in nodes.splitlines():
        name, _, where = ln.partition("|")
        if name in rows:
            rows[name]["NodeList"] = where
    return json.loads(p.stdout), scen, rows


def test_slurm_ran_the_tiers_first_and_kept_debug_on_its_node(history):
    _, _, rows = history
    start = {n: _t(r["Start"]) for n, r in rows.items()}
    end = {n: _t(r["End"]) for n, r in rows.items()}
    assert all(r["State"] == "COMPLETED" for r in rows.values())
    assert start["dbg4"] >= end["dbg8"]          # gpu02 was free, but not debug's
    assert start["wide"] >= end["dbg4"] and start["wide2"] >= end["wide"]   # tier 2 first, though submitted last
    assert rows["dbg8"]["NodeList"] == rows["dbg4"]["NodeList"] == "gpu01"


def test_the_import_writes_node_sets_and_tiers(history):
    rep, scen, _ = history
    doc = yaml.safe_load(scen.read_text())
    assert doc["hostnames"] == {"gpu": "gpu[01-02]"}
    assert doc["queues"] == {"debug": {"nodes": "gpu01", "priority_tier": 2},
                             "batch": {"nodes": "gpu[01-02]", "priority_tier": 1}}
    assert rep["partitions_read"]["partitions"] == 2 and rep["partitions_read"]["bad_lines"] == 0


def test_the_replay_with_partitions_reproduces_the_order_and_beats_one_without(history, tmp_path):
    _, scen, rows = history
    with_parts = _simulate(scen)
    flat_doc = yaml.safe_load(scen.read_text())
    del flat_doc["queues"], flat_doc["hostnames"]
    flat = tmp_path / "flat.yaml"
    flat_doc["cluster"] = str((scen.parent / flat_doc["cluster"]).resolve())
    flat_doc["workloads"][0]["path"] = str((scen.parent / flat_doc["workloads"][0]["path"]).resolve())
    flat.write_text(yaml.safe_dump(flat_doc))
    without = _simulate(flat)
    order = sorted(rows, key=lambda n: _t(rows[n]["Start"]))
    assert order == ["dbg8", "dbg4", "wide", "wide2"]
    assert with_parts["_order"] == order                 # the debug jobs first, one after the other
    assert without["_order"] != order
    e_with = with_parts["recorded_waits"]["all"]["mean_abs_error_s"]
    e_without = without["recorded_waits"]["all"]["mean_abs_error_s"]
    assert e_with < e_without
    print(f"mean |error| with partitions {e_with:.1f} s, without {e_without:.1f} s; per partition "
          f"{json.dumps(with_parts['recorded_waits']['partitions'])}", file=sys.stderr)   # for docs, never asserted


def _simulate(scen) -> dict:
    """The summary (--json), plus the jobs (by name, JOBS' submission order is the trace's and so the
    simulator's ids) in the order the replay started them, from the simulator's Python API."""
    p = subprocess.run([str(EXE), "simulate", "run", str(scen), "--json"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    from gpucluster.sim.run import simulate
    from gpucluster.specs.scenario import load_scenario
    res = simulate(load_scenario(scen))
    by_seq = sorted(res.jobs, key=lambda j: j.seq)
    assert len(by_seq) == len(JOBS) and all(j.first_start is not None for j in by_seq)
    name = {j.seq: JOBS[i][0] for i, j in enumerate(by_seq)}
    s["_order"] = [name[j.seq] for j in sorted(by_seq, key=lambda j: (j.first_start, j.seq))]
    return s


def test_the_import_reads_saved_scontrol_output_and_counts_bad_lines(slurm, history, tmp_path):
    text = slurm.run(["scontrol", "show", "partition", "-o"]).stdout
    saved = tmp_path / "parts.txt"
    saved.write_text(text + "PartitionName=broken Nodes=gpu[01- PriorityTier=1\n")
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200"}
    base = [str(EXE), "slurm", "import", "-o", str(tmp_path / "t.txt"), "--scenario", str(tmp_path / "s.yaml"),
            "--cluster", str(ROOT / "tests/integration/data/slurm-2node.yaml")]
    p = subprocess.run([*base, "--partitions", str(saved), "--json"], capture_output=True, text=True, env=env,
                       timeout=120, cwd=slurm.root)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)["partitions_read"]
    assert rep["partitions"] == 2 and rep["bad"] == {"Nodes is not a hostlist": {"lines": 1, "first_line": 3}}
    assert yaml.safe_load((tmp_path / "s.yaml").read_text())["queues"]["debug"] == {"nodes": "gpu01",
                                                                                    "priority_tier": 2}
    p = subprocess.run([*base, "--hostnames", "gpu=gpu[01-03]"], capture_output=True, text=True, env=env,
                       timeout=120, cwd=slurm.root)
    assert p.returncode == 2 and "gpu=gpu[01-03] names 3 nodes; pool 'gpu' has 2" in p.stderr
    assert "Traceback" not in p.stderr
