"""Build scenarios in memory for the simulator tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpucluster.sim.jobs import PENDING, RUNNING
from gpucluster.specs.loader import parse_data
from gpucluster.specs.scenario import LoadedScenario, Scenario

DATA = Path(__file__).parent / "data"


def pool(name: str, gpu: str, count: int, per_node: int = 8) -> dict[str, Any]:
    return {"name": name, "count": count, "gpu": gpu, "gpus_per_node": per_node, "cpu_cores": 64,
            "ram_gib": 1024, "nics_per_node": 1, "nic": "NDR400"}


def cluster(*pools: dict[str, Any], nodes_per_leaf: int | None = None) -> dict[str, Any]:
    fabric: dict[str, Any] = {"topology": "fat-tree", "switch": "QM9700"}
    if nodes_per_leaf:
        fabric["nodes_per_leaf"] = nodes_per_leaf
    return {"name": "test", "node_pools": list(pools), "fabric": fabric}


def scenario(workloads: list[dict], *, pools: list[dict] | None = None, **kw: Any) -> LoadedScenario:
    npl = kw.pop("npl", None)
    data = {"name": "t", "workloads": workloads, **kw}
    if "nodes_csv" not in kw:
        data["cluster"] = cluster(*(pools or [pool("a", "H100", 4)]), nodes_per_leaf=npl)
    spec = parse_data(Scenario, data, "<test>")
    assert not isinstance(spec.cluster, str)    # given inline, or none with nodes_csv
    return LoadedScenario(spec, spec.cluster, DATA, "<test>", {})


def occupancy(sim) -> np.ndarray:
    """Thousandths of each GPU held, recomputed from the running jobs alone."""
    occ = np.zeros(sim.state.total_gpus, dtype=np.int64)
    for job in sim.running.values():
        assert len(set(job.alloc.tolist())) == len(job.alloc), "a job holds one GPU twice"
        np.add.at(occ, job.alloc, job.milli)
        if job.milli >= 1000:
            assert np.all(occ[job.alloc] == 1000), "a whole GPU is shared"
    return occ


def check_now(sim) -> None:
    """The invariants at one instant."""
    st = sim.state
    occ = occupancy(sim)
    assert np.all(occ <= 1000), "a GPU allocated beyond its capacity"
    assert np.array_equal(occ, 1000 - st.gpu_free), "state and running jobs disagree"
    assert st.alloc_milli <= st.capacity * 1000
    for job in sim.running.values():
        assert job.state == RUNNING
        nodes = np.unique(st.gpu_node[job.alloc])
        assert np.all(st.node_up[nodes] & st.node_on[nodes]), "a job on a down or off node"
    st.check()


def watch(sim) -> list[int]:
    """Check the invariants after every start, stop and pass; returns a counter of checks."""
    n = [0]

    def hook(*_):
        check_now(sim)
        n[0] += 1
    sim.hooks_start.append(hook)
    sim.hooks_stop.append(hook)
    sim.hooks_pass.append(hook)
    return n


def pending_or_running_are_reported(sim) -> None:
    queued = {j.id for j in sim.queue}
    for job in sim.by_id.values():
        if job.state == PENDING:
            assert job.id in queued
        if job.state == RUNNING:
            assert job.id in sim.running


DATA = Path(__file__).parent / "data"


def gavel_small_scenario(path: Path, policy: str, extra: str = "") -> Path:
    """The 4 V100 + 4 P100 + 4 K80 cluster of Gavel's small trace, under `policy`; `extra`: more
    lines of the trace workload (indented four spaces) or of the scenario."""
    path.write_text(f"""
name: gavel-small
cluster:
  name: gavel-4-4-4
  fabric: {{topology: fat-tree, switch: QM9700}}
  node_pools:
    - {{name: v100, count: 4, gpu: "v100:1", cpu_cores: 8, ram_gib: 61, nics_per_node: 1, nic: NDR400}}
    - {{name: p100, count: 4, gpu: "p100:1", cpu_cores: 8, ram_gib: 61, nics_per_node: 1, nic: NDR400}}
    - {{name: k80, count: 4, gpu: "k80:1", cpu_cores: 4, ram_gib: 61, nics_per_node: 1, nic: NDR400}}
seed: 0
policy: {policy}
workloads:
  - kind: trace
    name: philly
    format: gavel
    path: {DATA / 'gavel_small.trace'}
    throughputs: {DATA / 'gavel_throughputs_2019_sample.json'}
{extra}""")
    return path
