"""Build a simulation from a scenario, run it, and summarise what it measured."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpucluster.files import is_file
from gpucluster.errors import UserError
from gpucluster.sim.jobs import Job
from gpucluster.sim.kernel import Kernel
from gpucluster.sim.state import ClusterState, NodeInfo
from gpucluster.specs.scenario import LoadedScenario
from gpucluster.specs.workload import filled

SCHEMA = "gpucluster-simulation/v1"


def nodes_from_spec(loaded: LoadedScenario) -> tuple[list[NodeInfo], list[dict]]:
    spec, reports = loaded.spec, []
    if loaded.cluster is not None:
        from gpucluster.model.topology import fabric_of
        cluster = loaded.cluster
        from gpucluster.sim.node_sets import node_name, pool_hostnames
        tree = fabric_of(cluster)
        names = pool_hostnames(loaded)   # the scenario's hostnames:, else <pool>-<index>
        nodes, i = [], 0
        for p in cluster.node_pools:
            for k in range(p.count):
                nodes.append(NodeInfo(node_name(names, p.name, k), p.name, p.gpu, p.gpus_per_node,
                                      tree.leaf_of(i, 0)))
                i += 1
    else:
        from gpucluster.sim.traces.openb import read_nodes
        path = loaded.path(filled(spec.nodes_csv))   # the scenario has a cluster or a node list
        if not is_file(path):
            raise UserError(f"node list not found: {path}", **loaded.where("nodes_csv"))
        nodes, read = read_nodes(str(path))
        reports.append(read.report())
    b = spec.cloud_burst
    if b is not None:
        first_leaf = max(n.leaf for n in nodes) + 1
        for k in range(b.max_nodes):
            nodes.append(NodeInfo(f"cloud-{k:04d}", "cloud", b.gpu, b.gpus_per_node, first_leaf + k // 32, cloud=True))
    return nodes, reports


@dataclass
class Result:
    summary: dict[str, Any]
    jobs: list[Job]
    sim: Any


def build(loaded: LoadedScenario, policy: str | None = None, seed: int | None = None,
          log: Callable[[dict], None] | None = None, policy_field: str | None = None):
    from gpucluster.sim.failures import FailureProcess
    from gpucluster.sim.metrics import Recorder
    from gpucluster.sim.policies import load_all
    from gpucluster.sim.simulator import SimConfig, Simulation
    from gpucluster.sim.workload import Context, build_workload

    spec = loaded.spec
    name = policy or spec.policy
    where = {"field": policy_field} if policy_field else loaded.where("policy")
    cls = load_all().get(name, **where)
    pol = cls(spec.policy_options if policy is None or policy == spec.policy else {}, spec.queues)
    kernel = Kernel(spec.seed if seed is None else seed)
    nodes, reports = nodes_from_spec(loaded)
    state = ClusterState(nodes)
    horizon = spec.horizon_days * 86400.0 if spec.horizon_days else None
    ctx = Context(loaded, horizon, list(state.pool_types), kernel.stream)
    build_workload(ctx)
    ctx.trace_reports[:0] = reports
    if not ctx.jobs and not ctx.services:
        raise UserError("the scenario has no jobs: no workload produces any within the horizon "
                        "(check arrivals, count and horizon_days)", file=loaded.source)
    cfg = SimConfig(horizon, spec.max_days * 86400.0, spec.spread_slowdown, spec.samples, dict(spec.queues))
    sim = Simulation(state, ctx.jobs, pol, kernel, cfg, log)
    sim.notes, sim.trace_reports = ctx.notes, ctx.trace_reports
    sim.recorder = Recorder(sim, spec.samples)
    if ctx.services:
        from gpucluster.sim.services import Autoscaler
        sim.services = ctx.services
        sim.autoscaler = Autoscaler(sim, ctx.services, ctx.next_id)
        sim.autoscaler.begin()
    if any(j.kind == "pipeline" for j in ctx.jobs):
        from gpucluster.sim.pipelines import Pipelines
        tiers = loaded.cluster.storage if loaded.cluster is not None else []   # a node list has no storage
        sim.pipelines = Pipelines(sim, {t.name: t for t in tiers})
    if spec.failures is not None:
        sim.failures = FailureProcess(sim, spec.failures, kernel.stream("failures"), loaded.base)
        sim.failures.begin()
    if spec.cloud_burst is not None:
        from gpucluster.sim.burst import Burst
        sim.burst = Burst(sim, spec.cloud_burst, np.flatnonzero(state.node_cloud), kernel.stream("burst"))
    sim.prices = type_prices(loaded)
    prepare = getattr(pol, "prepare", None)
    if prepare is not None:
        prepare(sim)
    from gpucluster.sim.scenario_checks import check_scenario
    sim.warnings = check_scenario(sim, loaded)   # errors raise; jobs that can never run become warnings
    return sim


def simulate(loaded: LoadedScenario, policy: str | None = None, seed: int | None = None,
             log: Callable[[dict], None] | None = None, on_progress: Callable[[float], None] | None = None,
             policy_field: str | None = None, keep_sim: Callable[[Any], None] | None = None) -> Result:
    t0 = time.perf_counter()
    sim = build(loaded, policy, seed, log, policy_field)
    if keep_sim is not None:
        keep_sim(sim)   # lets a caller (the CLI's Ctrl-C handler) set sim.kernel.stop_requested
    sim.run(on_progress)
    wall = time.perf_counter() - t0
    from gpucluster.sim.summary import summarize
    return Result(summarize(sim, loaded, wall), list(sim.by_id.values()), sim)


def type_prices(loaded: LoadedScenario) -> dict[str, float]:
    """Rental price per GPU-hour of each GPU type (the cluster spec's, else the catalog's)."""
    from gpucluster.catalog import catalog
    out: dict[str, float] = {}
    if loaded.cluster is not None:
        for p in loaded.cluster.node_pools:
            price = loaded.cluster.pool_prices(p.name).usd_per_gpu_hour
            if price is None and p.gpu_entry.prices.rental_usd_per_gpu_hour is not None:
                price = p.gpu_entry.prices.rental_usd_per_gpu_hour.value
            if price is not None:
                out.setdefault(p.gpu, price)
    b = loaded.spec.cloud_burst
    if b is not None and b.gpu not in out:
        rp = catalog.gpus.get(b.gpu).prices.rental_usd_per_gpu_hour
        price = b.usd_per_gpu_hour if b.usd_per_gpu_hour is not None else (rp.value if rp else None)
        if price is not None:
            out[b.gpu] = price
    return out
