"""`gpucluster topology --json`: schema gpucluster-topology/v1."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Open, Strict

SCHEMA: Final = "gpucluster-topology/v1"


class Tier(Open):
    """What one tier (hbm, scale-up, scale-out...) gives one GPU (model/topology.py Tier)."""
    name: str
    gbps_per_direction: Num
    latency_us: Num | None = None
    link: str | None = None
    provenance: str = ""


class Fabric(Strict):
    """The fat tree the cluster needs (model/topology.py FatTree, without its groups), with totals."""
    nodes: int
    endpoints: int
    switch_radix: int
    levels: int
    oversubscription: Num
    rail_optimized: bool
    leaf_down_ports: int
    leaf_up_ports: int
    nodes_per_leaf: int
    leaf_switches: int
    spine_switches: int
    core_switches: int
    pods: int
    leaves_per_pod: int
    node_leaf_cables: int
    leaf_spine_cables: int
    spine_core_cables: int
    max_endpoints: int
    assumptions: list[str]
    switches: int
    copper_cables: int
    optical_cables: int
    cables: int


class Bisection(Strict):
    delivered_gbps: Num
    target_gbps: Num
    ratio: Num
    provenance: list[str]


class TopologyDocument(Document):
    schema_: Literal["gpucluster-topology/v1"] = Field(SCHEMA, alias="schema")
    cluster: str
    nodes: int
    gpus: int
    tiers: dict[str, dict[str, Tier]] = Field(description="pool -> tier name -> tier")
    fabric: Fabric
    bisection: Bisection


