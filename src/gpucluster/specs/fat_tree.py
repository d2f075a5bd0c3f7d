"""Fat-tree sizing: how many leaves, spines and cores a fabric of k-port switches needs.

Pure arithmetic on counts (no catalog, no I/O), so a cluster spec can check that its fabric
can be built (`specs/cluster.py`) without importing the model above it; `model/topology.py`
re-exports it.

Fat tree (folded Clos) conventions, all stated as assumptions in `FatTree.assumptions`:

* Every switch, at every level, is the fabric's switch with `radix` ports; one NIC
  port uses one switch port (no breakout cables).
* Oversubscription is applied at the leaf only: a leaf has `d = floor(k*r/(1+r))`
  down ports and `ceil(down/r)` uplinks for the `down` ports it uses (r = 1:
  k/2 down, k/2 up). Spines in a 3-level tree are non-blocking (k/2 down, k/2 up).
* 2 levels: up to k leaves (every spine reaches every leaf), so at most k*d
  endpoints (non-blocking k^2/2). 3 levels: pods of k/2 leaves, at most k pods
  (every core reaches every pod), so at most k*(k/2)*d endpoints (non-blocking
  k^3/4, the k-ary fat tree of Al-Fares et al. 2008).
* Nodes fill leaves in order (rack by rack); a node's NICs all go to one leaf,
  unless the pool is rail-optimized, where NIC i of each of `nodes_per_leaf`
  nodes goes to the leaf of rail i (NVIDIA DGX SuperPOD reference wiring).
  Leaves never mix pools.
* Cables: node-to-leaf cables are copper DAC (leaf in or next to the rack,
  <= 3 m); every switch-to-switch cable is optical (AOC or transceivers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucluster.specs.cluster import Fabric, NodePool

_EPS = 1e-9

ASSUMPTIONS = (
    "all switches are the fabric's switch; one NIC port per switch port (no breakout cables)",
    "oversubscription only at the leaf: floor(k*r/(1+r)) down ports, ceil(down/r) uplinks; "
    "spines and cores non-blocking",
    "2 levels: at most k leaves; 3 levels: pods of k/2 leaves, at most k pods",
    "nodes fill leaves in order; leaves never mix pools; rail-optimized: NIC i to the rail-i leaf",
    "node-to-leaf cables are copper DAC (in-rack, <= 3 m); switch-to-switch cables are optical",
)


def _ceil(x: float) -> int:
    return math.ceil(x - _EPS)


@dataclass(frozen=True)
class LeafGroup:
    """One pool's nodes and the leaves they hang off (global node and leaf indices)."""
    pool: str
    first_node: int
    nodes: int
    nics_per_node: int
    rail_optimized: bool
    nodes_per_leaf: int     # nodes under one leaf (rail: under each rail's leaf)
    first_leaf: int
    leaves: int

    def leaf_of(self, node: int, nic: int) -> int:
        rel = node - self.first_node
        if self.rail_optimized:
            return self.first_leaf + (rel // self.nodes_per_leaf) * self.nics_per_node + nic
        return self.first_leaf + rel // self.nodes_per_leaf


@dataclass(frozen=True)
class FatTree:
    """A sized fat tree. Counts are whole switches and cables."""
    nodes: int
    endpoints: int                  # NIC ports that plug into leaves
    switch_radix: int               # ports per switch (k)
    levels: int                     # 1 single switch, 2 leaf-spine, 3 leaf-spine-core
    oversubscription: float         # requested leaf down:up ratio (>= 1)
    rail_optimized: bool            # any pool wired by rails
    leaf_down_ports: int            # d: ports per leaf for nodes (k when levels == 1)
    leaf_up_ports: int              # uplinks of a full leaf, ceil(d / r) (0 when levels == 1)
    nodes_per_leaf: int             # nodes under one full leaf (rail: per rail group) of the first pool
    leaf_switches: int
    spine_switches: int
    core_switches: int
    pods: int                       # 3 levels: groups of k/2 leaves sharing spines; else 1
    leaves_per_pod: int
    node_leaf_cables: int           # copper DAC
    leaf_spine_cables: int          # optical
    spine_core_cables: int          # optical
    max_endpoints: int              # what this radix, ratio and level count can hold (ports)
    groups: tuple[LeafGroup, ...] = ()
    assumptions: tuple[str, ...] = field(default=ASSUMPTIONS)

    @property
    def switches(self) -> int:
        return self.leaf_switches + self.spine_switches + self.core_switches

    @property
    def switch_cables(self) -> int:
        return self.leaf_spine_cables + self.spine_core_cables

    @property
    def copper_cables(self) -> int:
        return self.node_leaf_cables

    @property
    def optical_cables(self) -> int:
        return self.switch_cables

    @property
    def cables(self) -> int:
        return self.node_leaf_cables + self.switch_cables

    def leaf_of(self, node: int, nic: int) -> int:
        """Leaf index of NIC `nic` of global node `node`."""
        if self.levels == 1:
            return 0
        for g in self.groups:
            if g.first_node <= node < g.first_node + g.nodes:
                return g.leaf_of(node, nic)
        raise ValueError(f"node {node} is not in this fabric (0..{self.nodes - 1})")

    def pod_of(self, leaf: int) -> int:
        return leaf // self.leaves_per_pod if self.levels == 3 else 0

    def switch_hops(self, node_a: int, nic_a: int, node_b: int, nic_b: int) -> int:
        """Switches a packet crosses from one NIC to another: 1 same leaf, 3 via a
        spine, 5 via a core (without PXN forwarding over NVLink to the same rail)."""
        la, lb = self.leaf_of(node_a, nic_a), self.leaf_of(node_b, nic_b)
        if la == lb:
            return 1
        if self.levels == 2 or self.pod_of(la) == self.pod_of(lb):
            return 3
        return 5


def leaf_ports(radix: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a full leaf: d = floor(k*r/(1+r)), u = ceil(d/r)."""
    d = max(1, math.floor(radix * oversubscription / (1 + oversubscription) + _EPS))
    return d, _ceil(d / oversubscription)


def _check(radix: int, oversubscription: float, levels: int | None) -> int:
    if isinstance(radix, bool) or not float(radix).is_integer():
        raise ValueError(f"switch radix must be a whole number of ports, got {radix}")
    k = int(radix)
    if k < 2:
        raise ValueError(f"switch radix {k} is too small: a fat tree needs switches of at least 2 ports")
    if not (oversubscription >= 1) or math.isinf(oversubscription):
        raise ValueError(f"oversubscription must be a finite ratio >= 1 (1 = non-blocking), got {oversubscription}")
    if levels is not None and levels not in (1, 2, 3):
        raise ValueError(f"levels must be 1, 2 or 3, got {levels}")
    return k


def _layout(spec: Sequence[tuple[str, int, int, bool]], d: int, r: float,
            nodes_per_leaf: int | None) -> tuple[list[LeafGroup], list[int]]:
    """Leaf groups and the uplink count of every leaf, in leaf order."""
    groups: list[LeafGroup] = []
    ups: list[int] = []
    first_node = 0
    for pool, nodes, nics, rail in spec:
        if rail:
            npl = nodes_per_leaf or d
            if npl > d:
                raise ValueError(f"nodes_per_leaf {npl} exceeds the {d} down ports of a leaf "
                                 f"(radix and oversubscription {r:g}:1)")
        else:
            if nics > d:
                raise ValueError(f"pool {pool!r}: {nics} NICs per node do not fit on one leaf's {d} down "
                                 f"ports; use rail_optimized or a larger-radix switch")
            npl = nodes_per_leaf or d // nics
            if npl * nics > d:
                raise ValueError(f"nodes_per_leaf {npl} x {nics} NICs = {npl * nics} exceeds the {d} down "
                                 f"ports of a leaf (radix and oversubscription {r:g}:1)")
        n_groups = _ceil(nodes / npl)
        for j in range(n_groups):
            members = min(npl, nodes - j * npl)
            if rail:
                ups.extend([_ceil(members / r)] * nics)
            else:
                ups.append(_ceil(members * nics / r))
        leaves = n_groups * nics if rail else n_groups
        groups.append(LeafGroup(pool, first_node, nodes, nics, rail, npl, len(ups) - leaves, leaves))
        first_node += nodes
    return groups, ups


def build_fat_tree(pools: Sequence[tuple[str, int, int, bool]], switch_radix: int,
                   levels: int | None = None, oversubscription: float = 1.0,
                   nodes_per_leaf: int | None = None) -> FatTree:
    """A fat tree for several pools `(name, nodes, nics_per_node, rail_optimized)`
    on one fabric; see `fat_tree` for one pool. Raises ValueError when it cannot be built."""
    k = _check(switch_radix, oversubscription, levels)
    r = float(oversubscription)
    if not pools:
        raise ValueError("a fabric needs at least one node")
    for name, nodes, nics, _ in pools:
        if nodes < 1 or nics < 1:
            raise ValueError(f"pool {name!r}: nodes ({nodes}) and NICs per node ({nics}) must be >= 1")
    n = sum(p[1] for p in pools)
    e = sum(p[1] * p[2] for p in pools)
    rail = any(p[3] for p in pools)
    d, u = leaf_ports(k, r)

    one_fits = e <= k and (nodes_per_leaf is None or n <= nodes_per_leaf)
    if levels == 1 or (levels is None and one_fits):
        if not one_fits:
            why = (f"{e} NIC ports exceed one {k}-port switch" if e > k else
                   f"{n} nodes exceed nodes_per_leaf {nodes_per_leaf}")
            raise ValueError(f"a single switch cannot hold this fabric: {why}; use 2 or 3 levels")
        groups, first = [], 0
        for name, nodes, nics, rl in pools:
            groups.append(LeafGroup(name, first, nodes, nics, rl, n, 0, 1))
            first += nodes
        return FatTree(n, e, k, 1, r, rail, k, 0, n, 1, 0, 0, 1, 1, e, 0, 0, k, tuple(groups))

    groups, ups = _layout(pools, d, r, nodes_per_leaf)
    n_leaves, up_total = len(ups), sum(ups)
    per_pod = max(1, k // 2)
    max2, max3 = k * d, k * per_pod * d
    if levels is None:
        levels = 2 if n_leaves <= k else 3
    if levels == 2 and n_leaves > k:
        raise ValueError(f"{e} NIC ports need {n_leaves} leaves ({d} down ports each) but 2 levels of "
                         f"{k}-port switches hold at most {k} leaves ({max2} endpoints); use levels: 3")
    pods = _ceil(n_leaves / per_pod) if levels == 3 else 1
    if levels == 3 and pods > k:
        raise ValueError(f"{e} NIC ports need {n_leaves} leaves ({d} down ports each) but 3 levels of "
                         f"{k}-port switches hold at most {k * per_pod} leaves ({max3} endpoints at "
                         f"{r:g}:1); use a larger-radix switch or more oversubscription")
    if levels == 2:
        spines, cores, spine_core = _ceil(up_total / k), 0, 0
        per_pod_out = n_leaves
    else:
        spines = sum(_ceil(sum(ups[i:i + per_pod]) / per_pod) for i in range(0, n_leaves, per_pod))
        cores, spine_core = _ceil(up_total / k), up_total
        per_pod_out = per_pod
    return FatTree(
        nodes=n, endpoints=e, switch_radix=k, levels=levels, oversubscription=r, rail_optimized=rail,
        leaf_down_ports=d, leaf_up_ports=u, nodes_per_leaf=groups[0].nodes_per_leaf,
        leaf_switches=n_leaves, spine_switches=spines, core_switches=cores, pods=pods,
        leaves_per_pod=per_pod_out, node_leaf_cables=e, leaf_spine_cables=up_total,
        spine_core_cables=spine_core, max_endpoints=max2 if levels == 2 else max3, groups=tuple(groups))


def fat_tree(nodes: int, nics_per_node: int, switch_radix: int, levels: int | None = None,
             oversubscription: float = 1.0, rail_optimized: bool = False,
             nodes_per_leaf: int | None = None) -> FatTree:
    """Size a fat tree for `nodes` x `nics_per_node` NIC ports on `switch_radix`-port
    switches; `levels` None picks the fewest that fit. ValueError when it cannot be built
    (radix < 2, oversubscription < 1, more endpoints than 3 levels hold, levels too few)."""
    return build_fat_tree([("nodes", nodes, nics_per_node, rail_optimized)], switch_radix,
                          levels, oversubscription, nodes_per_leaf)


def fabric_of_pools(pools: Sequence[NodePool], fabric: Fabric) -> FatTree:
    """The fat tree that a spec's pools and fabric section describe."""
    rail_all = fabric.topology == "rail-optimized"
    levels = 1 if fabric.topology == "single-switch" else fabric.levels
    return build_fat_tree([(p.name, p.count, p.nics_per_node, p.rail_optimized or rail_all) for p in pools],
                          int(fabric.switch_entry.radix.value), levels, fabric.oversubscription,
                          fabric.nodes_per_leaf)
