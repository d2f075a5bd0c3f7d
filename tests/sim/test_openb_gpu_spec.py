"""openb's gpu_spec is honoured: in the simulator, in the fill experiment and in the fragmentation measure;
the benchmark takes trace paths and prints JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import DATA, scenario

from gpucluster.sim.fragmentation import FragModel
from gpucluster.sim.jobs import Job
from gpucluster.sim.openb_fill import POLICIES, Filler, fill
from gpucluster.sim.run import simulate
from gpucluster.sim.state import WHOLE, ClusterState, NodeInfo
from gpucluster.sim.traces import TraceJob
from gpucluster.sim.traces.openb import read_nodes

ROOT = Path(__file__).resolve().parents[2]
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def two_types() -> list[NodeInfo]:
    return [NodeInfo("a0", "A", "A", 4, 0, 32000, 65536), NodeInfo("a1", "A", "A", 4, 0, 32000, 65536),
            NodeInfo("b0", "B", "B", 8, 0, 64000, 131072)]


def test_simulated_pods_run_only_on_their_gpu_spec(tmp_path):
    rows = [f"p{i},1000,1024,{g},{m},{spec},LS,Running,{i},{i + 5000},{i}\n"
            for i, (g, m, spec) in enumerate([(1, 1000, "T4"), (1, 500, "T4|P100"), (2, 1000, "G2"),
                                               (1, 300, "P100"), (1, 1000, ""), (4, 1000, "T4")] * 4)]
    (tmp_path / "pods.csv").write_text(HEADER + "".join(rows))
    loaded = scenario([{"kind": "trace", "name": "pods", "format": "openb", "path": str(tmp_path / "pods.csv")}],
                      nodes_csv="openb_nodes.csv", policy="binpack")
    res = simulate(loaded)
    started = [j for j in res.jobs if j.first_start is not None]
    assert len(started) == len(rows)
    for j in started:
        assert j.types is None or j.gpu_type in j.types, (j.types, j.gpu_type)
    assert {j.gpu_type for j in started if j.types == frozenset({"T4"})} == {"T4"}


@pytest.mark.parametrize("policy", POLICIES)
def test_fill_places_constrained_tasks_on_their_type_only(policy):
    st = ClusterState(two_types())
    frag = FragModel.from_jobs(st, [Job(0, "m", "batch", 1, 0.0, 1.0)])
    f = Filler(policy, st, frag, seed=1)
    for _ in range(8):                       # fills the 8 A GPUs one whole GPU at a time
        assert f.place(1, WHOLE, 1000, 1024, ("A",))
    used = 1000 - f.scr.gpu_free
    assert used[:8].sum() == 8 * WHOLE and used[8:].sum() == 0
    assert not f.place(1, 500, 1000, 1024, ("A",))      # no A left, though 8 B GPUs are free
    assert f.place(1, 500, 1000, 1024, ("A", "B"))
    assert f.place(4, WHOLE, 1000, 1024, None)


def test_fragmentation_counts_nodes_of_another_type_as_fragment():
    st = ClusterState(two_types())
    free = st.gpu_free.copy()
    any_type = FragModel(st, [(0, 1, WHOLE, 1.0)])
    only_a = FragModel(st, [(0, 1, WHOLE, 1.0, frozenset({"A"}))])
    usable = np.ones(3, dtype=bool)
    assert any_type.cluster(free, st.cpu_free, usable) == (0.0, 16.0)
    assert only_a.cluster(free, st.cpu_free, usable) == (8.0, 16.0)     # B's 8 GPUs are of no use to it


def test_fill_reaches_the_levels_and_accounts_every_task():
    nodes, _ = read_nodes(str(DATA / "openb_nodes.csv"))
    pods = [TraceJob(0, 1, 1, 500, 1000, 1024, ("T4",)), TraceJob(0, 1, 2, 1000, 2000, 2048, None),
            TraceJob(0, 1, 0, 0, 4000, 4096, None), TraceJob(0, 1, 1, 1000, 1000, 1024, ("G2",))]
    st = ClusterState(nodes)
    frag = FragModel.from_jobs(st, [Job(0, "m", "batch", p.gpus, 0.0, 1.0, milli=p.milli,
                                        types=frozenset(p.gpu_types) if p.gpu_types else None)
                                    for p in pods if p.gpus])
    for policy in POLICIES:
        out = fill(policy, ClusterState(nodes), pods, frag, seed=0)
        assert [r["arrived"] for r in out] == [0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]
        for r in out:
            assert 0 <= r["allocation"] <= 1 and r["unallocated"] == pytest.approx(1 - r["allocation"])
            assert 0 <= r["frag_of_free"] <= 1 + 1e-9
        allocs = [r["allocation"] for r in out]
        assert allocs == sorted(allocs)             # no departures: allocation never falls


def bench(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_openb.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_benchmark_takes_trace_paths_and_prints_json(tmp_path):
    rows = [f"p{i},1000,1024,1,{m},,LS,Running,0,10,0\n" for i, m in enumerate([1000, 500, 250, 1000, 700])]
    (tmp_path / "pods.csv").write_text(HEADER + "".join(rows))
    proc = bench("--pods", str(tmp_path / "pods.csv"), "--nodes", str(DATA / "openb_nodes.csv"),
                 "--policies", "best-fit,packing", "--reps", "1", "--gpu-spec-share", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == 2 * 2 * 7                      # traces x policies x levels
    assert {r["policy"] for r in out} == {"best-fit", "packing"}
    assert {"allocation", "unallocated", "frag_of_free", "failed_tasks"} <= set(out[0])
    assert len({r["trace"] for r in out}) == 2


def test_benchmark_bad_input_is_one_line(tmp_path):
    proc = bench("--pods", str(tmp_path / "missing.csv"))
    assert proc.returncode == 2 and "--pods" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = bench("--policies", "best-fit,worst-fit")
    assert proc.returncode == 2 and "worst-fit" in proc.stderr and "fgd" in proc.stderr


def test_pods_whose_gpu_spec_the_cluster_lacks_are_a_named_warning(tmp_path):
    rows = ["p0,1000,1024,1,1000,A100,LS,Running,0,100,0\n", "p1,1000,1024,1,1000,,LS,Running,0,100,0\n"]
    (tmp_path / "pods.csv").write_text(HEADER + "".join(rows))
    loaded = scenario([{"kind": "trace", "name": "pods", "format": "openb", "path": str(tmp_path / "pods.csv")}],
                      nodes_csv="openb_nodes.csv", policy="binpack")
    res = simulate(loaded)
    (w,) = res.summary["warnings"]
    assert w["code"] == "no_gpu_type" and w["jobs"] == 1 and w["field"] == "workloads[0].path"
