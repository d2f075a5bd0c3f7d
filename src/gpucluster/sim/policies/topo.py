"""Topology-aware gang placement: EASY backfill whose gangs take the fewest nodes and
leaf switches (the leaf that fits the gang most tightly, else the fewest leaves,
fullest first), as Slurm's topology/tree plugin and topology-aware Kubernetes
gang schedulers do. A gang spread over more leaves than it needs runs slower
(the scenario's spread_slowdown), so packing pays in run time."""

from __future__ import annotations

from gpucluster.sim.policies import policies
from gpucluster.sim.policies.backfill import EasyBackfill


@policies.register("topo", "topology", "topology-aware")
class TopologyAware(EasyBackfill):
    name = "topo"
    summary = "EASY backfill with topology-aware gangs (fewest leaf switches, tightest leaf)"
    placement = "topology"
