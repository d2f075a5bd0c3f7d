"""Fabric topology: fat-tree sizing, bisection bandwidth, bandwidth tiers, hop counts.

Pure functions, no I/O (catalog entries are read through the registry, which loads
its data files once).

The fat tree itself (sizing and its conventions) is `gpucluster.specs.fat_tree`: a cluster
spec checks that its fabric can be built without importing the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucluster.catalog import catalog
from gpucluster.specs.fat_tree import (  # noqa: F401  (re-exported: the model's fabric API)
    _EPS, ASSUMPTIONS, FatTree, LeafGroup, _ceil, build_fat_tree, fabric_of_pools, fat_tree, leaf_ports,
)

if TYPE_CHECKING:  # specs sit above model; only types are needed here
    from gpucluster.specs.cluster import ClusterSpec, NodePool

# -- from a cluster spec -------------------------------------------------------------

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
