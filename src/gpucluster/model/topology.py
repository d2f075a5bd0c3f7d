"""Fabric topology: fat-tree sizing, bisection bandwidth, bandwidth tiers, hop counts.

Pure functions, no I/O (catalog entries are read through the registry, which loads
its data files once).

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

from gpucluster.catalog import catalog

if TYPE_CHECKING:  # specs sit above model; only types are needed here
    from gpucluster.specs.cluster import ClusterSpec, Fabric, NodePool

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


# -- from a cluster spec -------------------------------------------------------------

def fabric_of_pools(pools: Sequence[NodePool], fabric: Fabric) -> FatTree:
    """The fat tree that a spec's pools and fabric section describe."""
    rail_all = fabric.topology == "rail-optimized"
    levels = 1 if fabric.topology == "single-switch" else fabric.levels
    return build_fat_tree([(p.name, p.count, p.nics_per_node, p.rail_optimized or rail_all) for p in pools],
                          int(fabric.switch_entry.radix.value), levels, fabric.oversubscription,
                          fabric.nodes_per_leaf)


def fabric_of(spec: ClusterSpec) -> FatTree:
    return fabric_of_pools(spec.node_pools, spec.fabric)


# -- bisection bandwidth ---------------------------------------------------------------

def bisection_target_gbps(nodes: int, gpus_per_node: int, scale_up_gbps: float) -> float:
    """Seed target: `nodes/2 * gpus_per_node * scale_up_gbps / 4` in GB/s.

    The seed's example plugs in 900 GB/s, NVLink4's *bidirectional* figure
    (450 GB/s per direction), so the target counts both directions:
    512 nodes x 8 GPUs x 900 GB/s -> 256 * 8 * 900 / 4 = 460,800 GB/s = 460.8 TB/s."""
    return nodes / 2 * gpus_per_node * scale_up_gbps / 4


def bisection_gbps(tree: FatTree, nic_gbit: float, port_gbit: float | None = None) -> float:
    """Bisection bandwidth the tree delivers, GB/s, both directions counted (as the seed's target).

    Cut the endpoints into halves; each direction carries at most half the NICs'
    injection, E/2 * nic_gbit, and (levels >= 2, halves on different leaves) at most
    the uplinks of half the leaves, U/2 * port_gbit. Both directions:
    min(E * nic_gbit, U * port_gbit) / 8. One switch (or one leaf) is non-blocking: E * nic_gbit / 8."""
    return _bisection(tree, tree.endpoints * nic_gbit, port_gbit or nic_gbit)


def _bisection(tree: FatTree, injection_gbit: float, port_gbit: float) -> float:
    if tree.levels == 1 or tree.leaf_switches == 1:
        return injection_gbit / 8
    return min(injection_gbit, tree.leaf_spine_cables * port_gbit) / 8


@dataclass(frozen=True)
class Bisection:
    delivered_gbps: float   # GB/s, both directions
    target_gbps: float      # seed formula, GB/s, both directions (bidirectional NVLink)
    ratio: float            # delivered / target
    tree: FatTree
    provenance: tuple[str, ...]


def bisection(spec: ClusterSpec) -> Bisection:
    """Delivered vs target bisection bandwidth of a spec (pools summed)."""
    tree = fabric_of(spec)
    sw = spec.fabric.switch_entry
    inj = sum(p.count * p.nics_per_node * link_gbit(spec, p) for p in spec.node_pools)
    delivered = _bisection(tree, inj, sw.port_gbit.value)
    target = sum(bisection_target_gbps(p.count, p.gpus_per_node,
                                       2 * p.gpu_entry.scale_up.bandwidth_gbps_per_direction.value)
                 for p in spec.node_pools)
    prov = (
        f"delivered = min(sum(count x nics_per_node x min(NIC line_rate_gbit, switch port_gbit)) = {inj:g} Gbit/s, "
        f"{tree.leaf_spine_cables} leaf uplinks x {sw.name}.port_gbit {sw.port_gbit.value:g}) / 8, both directions",
        "target = sum over pools of count/2 x gpus_per_node x (2 x GPU scale_up.bandwidth_gbps_per_direction) / 4 "
        "(seed formula, bidirectional scale-up bandwidth)",
    )
    return Bisection(delivered, target, delivered / target if target else math.inf, tree, prov)


# -- bandwidth tiers -------------------------------------------------------------------

@dataclass(frozen=True)
class Tier:
    name: str                        # hbm | scale-up | scale-out | scale-out-cross-leaf
    gbps_per_direction: float        # GB/s per GPU (hbm: reads + writes share it)
    latency_us: float | None         # one hop over this tier's link; None: not in the catalog
    link: str | None                 # catalog link technology
    provenance: str


def link_gbit(spec: ClusterSpec, pool: NodePool) -> float:
    """Line rate a pool's NIC port runs at: the NIC's, or the switch port's if slower
    (a 400G NIC on a 200G port links at 200G)."""
    return min(pool.nic_entry.line_rate_gbit.value, spec.fabric.switch_entry.port_gbit.value)


def _pool(spec: ClusterSpec, pool_name: str | None) -> NodePool:
    if pool_name is None:
        if len(spec.node_pools) > 1:
            raise ValueError(f"cluster {spec.name!r} has {len(spec.node_pools)} pools "
                             f"({', '.join(p.name for p in spec.node_pools)}); name one")
        return spec.node_pools[0]
    return spec.pool(pool_name)


def _effective_oversubscription(spec: ClusterSpec, tree: FatTree) -> float:
    return 1.0 if tree.levels == 1 or tree.leaf_switches == 1 else spec.fabric.oversubscription


def tiers(spec: ClusterSpec, pool_name: str | None = None) -> dict[str, Tier]:
    """Per-GPU bandwidth and latency of each tier a GPU of the pool talks over
    (pool_name may be omitted when the cluster has one pool)."""
    p = _pool(spec, pool_name)
    gpu, nic = p.gpu_entry, p.nic_entry
    su = gpu.scale_up
    su_link, so_link = catalog.links.get(su.link), catalog.links.get(nic.link)
    hbm = gpu.memory.bandwidth_tbps
    rate = link_gbit(spec, p)
    nic_per_gpu = p.nics_per_node * rate / 8 / p.gpus_per_node
    tree = fabric_of(spec)
    over = _effective_oversubscription(spec, tree)
    slower = (f" capped at {spec.fabric.switch}.port_gbit" if rate < nic.line_rate_gbit.value else "")
    so_prov = (f"{p.nics_per_node} x {nic.name}.line_rate_gbit {nic.line_rate_gbit.value:g} Gbit/s{slower} / 8 / "
               f"{p.gpus_per_node} GPUs per node ({nic.line_rate_gbit.source}); latency {so_link.name}.hop_latency_us "
               f"({so_link.hop_latency_us.source})")
    return {
        "hbm": Tier("hbm", hbm.value * 1000, None, None,
                    f"{gpu.name}.memory.bandwidth_tbps {hbm.value:g} TB/s x 1000 ({hbm.source}); "
                    f"half-duplex, reads and writes share it; no HBM latency in the catalog"),
        "scale-up": Tier("scale-up", su.bandwidth_gbps_per_direction.value, su_link.hop_latency_us.value,
                         su_link.name,
                         f"{gpu.name}.scale_up.bandwidth_gbps_per_direction "
                         f"({su.bandwidth_gbps_per_direction.source}); "
                         f"latency {su_link.name}.hop_latency_us ({su_link.hop_latency_us.source})"),
        "scale-out": Tier("scale-out", nic_per_gpu, so_link.hop_latency_us.value, so_link.name, so_prov),
        "scale-out-cross-leaf": Tier(
            "scale-out-cross-leaf", nic_per_gpu / over, so_link.hop_latency_us.value, so_link.name,
            so_prov + (f"; / fabric.oversubscription {over:g} at the leaf uplinks" if tree.levels > 1 and
                       tree.leaf_switches > 1 else "; one switch: no leaf uplinks, no oversubscription")),
    }


# -- GPU placement and hops --------------------------------------------------------------

@dataclass(frozen=True)
class GpuLocation:
    pool: str
    node: int           # global node index (pools in spec order)
    node_in_pool: int
    local_gpu: int      # index within the node
    nic: int            # the compute NIC it uses: local_gpu * nics_per_node // gpus_per_node
    domain: tuple[str, int]  # (pool, index of its scale-up domain within the pool)


def locate(spec: ClusterSpec, gpu: int) -> GpuLocation:
    """Where global GPU index `gpu` sits (pools in spec order, nodes in order, GPUs in order)."""
    if not 0 <= gpu < spec.total_gpus:
        raise ValueError(f"GPU index {gpu} is out of range 0..{spec.total_gpus - 1}")
    first_gpu, first_node = 0, 0
    for p in spec.node_pools:
        if gpu < first_gpu + p.total_gpus:
            rel = gpu - first_gpu
            nip, local = divmod(rel, p.gpus_per_node)
            return GpuLocation(p.name, first_node + nip, nip, local,
                               local * p.nics_per_node // p.gpus_per_node, (p.name, rel // p.domain_size))
        first_gpu += p.total_gpus
        first_node += p.count
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class Route:
    """How two GPUs reach each other: the tier and the switches crossed."""
    tier: str       # self | scale-up | leaf | spine | core
    switches: int   # 0 self; 1 scale-up (one NVSwitch) or one leaf; 3 via a spine; 5 via a core


def route(spec: ClusterSpec, gpu_a: int, gpu_b: int) -> Route:
    """The route between two global GPU indices (see `hops`)."""
    a, b = locate(spec, gpu_a), locate(spec, gpu_b)
    if gpu_a == gpu_b:
        return Route("self", 0)
    if a.domain == b.domain:
        return Route("scale-up", 1)
    n = fabric_of(spec).switch_hops(a.node, a.nic, b.node, b.nic)
    return Route({1: "leaf", 3: "spine", 5: "core"}[n], n)


def hops(spec: ClusterSpec, gpu_a: int, gpu_b: int) -> int:
    """Hop count between two global GPU indices.

    0: the same GPU. 1: the same scale-up domain (one NVSwitch, or one direct link).
    Otherwise the number of fabric switches crossed between the GPUs' NICs:
    1 the same leaf, 3 through a spine, 5 through a core. No PXN: a GPU sends
    through its own NIC (rail-optimized, different rails cross a spine).
    A 1 is either the scale-up domain or one leaf switch; `route` tells them apart."""
    return route(spec, gpu_a, gpu_b).switches


@dataclass(frozen=True)
class ScaleOutView:
    """What a collective-communication model needs to know about one pool."""
    gpus_per_node: int
    domain_size: int
    scale_up_gbps_per_direction: float
    scale_up_link: str
    in_switch_reduction: bool
    nic_gbps_per_gpu_per_direction: float
    scale_out_link: str
    nodes_per_leaf: int           # the pool's nodes that share one leaf (rail: one leaf per rail)
    oversubscription: float       # at leaf uplinks; 1.0 when the fabric is one switch
    nodes: int


def scale_out_view(spec: ClusterSpec, pool: str | None = None) -> ScaleOutView:
    p = _pool(spec, pool)
    tree = fabric_of(spec)
    gpu, nic = p.gpu_entry, p.nic_entry
    group = next(g for g in tree.groups if g.pool == p.name)
    return ScaleOutView(
        gpus_per_node=p.gpus_per_node,
        domain_size=p.domain_size,
        scale_up_gbps_per_direction=gpu.scale_up.bandwidth_gbps_per_direction.value,
        scale_up_link=catalog.links.canonical(gpu.scale_up.link),
        in_switch_reduction=gpu.scale_up.in_switch_reduction,
        nic_gbps_per_gpu_per_direction=p.nics_per_node * link_gbit(spec, p) / 8 / p.gpus_per_node,
        scale_out_link=catalog.links.canonical(nic.link),
        nodes_per_leaf=min(p.count, group.nodes_per_leaf),
        oversubscription=_effective_oversubscription(spec, tree),
        nodes=p.count,
    )
