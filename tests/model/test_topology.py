"""Fat-tree sizing, bisection bandwidth, tiers, hops and the scale-out view, checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.model.topology import (ASSUMPTIONS, FatTree, Route, bisection, bisection_gbps,
                                       bisection_target_gbps, build_fat_tree, fabric_of, fat_tree, hops,
                                       leaf_ports, locate, route, scale_out_view, tiers)
from gpucluster.specs.cluster import ClusterSpec, load_cluster

ROOT = Path(__file__).resolve().parents[2]


def example(name: str) -> ClusterSpec:
    return load_cluster(ROOT / "examples" / f"{name}.yaml")


def spec(count=4, gpu="H100", gpus_per_node=8, nics=8, nic="NDR400", switch="QM9700", rail=False, **fabric):
    return ClusterSpec.model_validate({
        "name": "t",
        "node_pools": [{"name": "p", "count": count, "gpu": gpu, "gpus_per_node": gpus_per_node,
                        "cpu_cores": 64, "ram_gib": 1024, "nics_per_node": nics, "nic": nic,
                        "rail_optimized": rail}],
        "fabric": {"switch": switch, **fabric},
    })


# --- fat tree, by hand ----------------------------------------------------------------------------

def test_256_endpoints_on_64_port_switches():
    # 32 nodes x 8 NICs = 256 ports. Non-blocking leaf: 64 ports = 32 down + 32 up.
    # 32 down / 8 NICs = 4 nodes per leaf -> 32 / 4 = 8 leaves; 8 x 32 = 256 uplinks;
    # 256 / 64 ports = 4 spines (each leaf has 8 links to each spine). 2 levels, no core.
    # Cables: 256 node-leaf (copper), 256 leaf-spine (optical). 2 levels hold 64 leaves x 32 = 2048.
    t = fat_tree(32, 8, 64)
    assert (t.levels, t.leaf_switches, t.spine_switches, t.core_switches) == (2, 8, 4, 0)
    assert (t.leaf_down_ports, t.leaf_up_ports, t.nodes_per_leaf) == (32, 32, 4)
    assert (t.node_leaf_cables, t.leaf_spine_cables, t.spine_core_cables) == (256, 256, 0)
    assert (t.copper_cables, t.optical_cables, t.cables) == (256, 256, 512)
    assert t.switches == 12 and t.max_endpoints == 64 ** 2 // 2 == 2048


def test_256_endpoints_rail_optimized():
    # 8 rails, each rail leaf takes NIC i of up to 32 nodes: 32 nodes -> 1 group x 8 rail leaves,
    # each 32 down / 32 up -> same 8 leaves and 4 spines as the plain tree.
    t = fat_tree(32, 8, 64, rail_optimized=True)
    assert (t.leaf_switches, t.spine_switches, t.nodes_per_leaf, t.rail_optimized) == (8, 4, 32, True)
    # node 5: rail 3 is leaf 3 in a rail tree, and node 5 sits on leaf 5 // 4 = 1 in a plain tree
    assert t.leaf_of(5, 3) == 3 and fat_tree(32, 8, 64).leaf_of(5, 3) == 1


def test_1024_nodes_need_three_levels():
    # 1024 x 8 = 8192 ports > 2048 (two levels of 64-port switches): 3 levels.
    # 8192 / 32 = 256 leaves; pods of 64/2 = 32 leaves -> 8 pods; each pod's 32 x 32 = 1024
    # uplinks / 32 spine down ports = 32 spines -> 256 spines; 8192 spine uplinks / 64 = 128 cores.
    t = fat_tree(1024, 8, 64)
    assert t.levels == 3
    assert (t.leaf_switches, t.pods, t.spine_switches, t.core_switches) == (256, 8, 256, 128)
    assert (t.node_leaf_cables, t.leaf_spine_cables, t.spine_core_cables) == (8192, 8192, 8192)
    assert t.max_endpoints == 64 ** 3 // 4 == 65536
    assert t.switches == 640


def test_single_switch():
    # 32 nodes x 1 NIC on one 64-port switch: one level, no switch-to-switch cables
    t = fat_tree(32, 1, 64)
    assert (t.levels, t.switches, t.copper_cables, t.optical_cables, t.max_endpoints) == (1, 1, 32, 0, 64)


def test_level_boundaries():
    assert fat_tree(64, 1, 64).levels == 1
    assert fat_tree(65, 1, 64).levels == 2
    assert fat_tree(2048, 1, 64).levels == 2          # 64 leaves x 32
    assert fat_tree(2048, 1, 64).leaf_switches == 64
    assert fat_tree(2049, 1, 64).levels == 3          # a 65th leaf
    assert fat_tree(65536, 1, 64).levels == 3         # k^3/4, the 3-level maximum
    with pytest.raises(ValueError, match="larger-radix switch"):
        fat_tree(65537, 1, 64)


def test_oversubscription_two_to_one():
    # k = 64, r = 2: d = floor(64 * 2/3) = 42 down, 21 up. 84 nodes x 1 NIC: 2 leaves of 42,
    # 42 uplinks -> 1 spine. 2 levels hold 64 x 42 = 2688 ports.
    assert leaf_ports(64, 2) == (42, 21)
    assert leaf_ports(64, 3) == (48, 16)
    assert leaf_ports(64, 1) == (32, 32)
    t = fat_tree(84, 1, 64, oversubscription=2)
    assert (t.leaf_switches, t.spine_switches, t.leaf_spine_cables, t.max_endpoints) == (2, 1, 42, 2688)


def test_partial_leaf_uplinks_follow_its_ports():
    # 5 nodes x 8 NICs, k = 16 non-blocking: d = 8 -> one node per leaf, 5 leaves of 8 up = 40 -> 3 spines
    t = fat_tree(5, 8, 16)
    assert (t.leaf_switches, t.leaf_spine_cables, t.spine_switches) == (5, 40, 3)
    # 2:1 on 40 ports, 7 nodes (56 ports > 40): d = floor(40 * 2/3) = 26; 3 nodes (24 ports) per
    # leaf -> leaves of 3, 3, 1 nodes with ceil(24/2) = 12, 12 and ceil(8/2) = 4 uplinks = 28 -> 1 spine
    t = fat_tree(7, 8, 40, oversubscription=2)
    assert (t.leaf_down_ports, t.nodes_per_leaf, t.leaf_switches, t.leaf_spine_cables, t.spine_switches) == \
        (26, 3, 3, 28, 1)


def test_nodes_per_leaf():
    # 2 nodes per leaf (16 of 32 down ports used): 32 nodes -> 16 leaves x 16 uplinks = 256 -> 4 spines
    t = fat_tree(32, 8, 64, nodes_per_leaf=2)
    assert (t.leaf_switches, t.spine_switches) == (16, 4)
    with pytest.raises(ValueError, match="nodes_per_leaf 5 x 8 NICs = 40 exceeds the 32 down ports"):
        fat_tree(32, 8, 64, nodes_per_leaf=5)
    with pytest.raises(ValueError, match="nodes_per_leaf 33 exceeds the 32 down ports"):
        fat_tree(64, 8, 64, nodes_per_leaf=33, rail_optimized=True)


@pytest.mark.parametrize("radix", [1, 0, -4])
def test_radix_too_small(radix):
    with pytest.raises(ValueError, match=f"switch radix {radix} is too small"):
        fat_tree(4, 1, radix)


def test_bad_arguments():
    with pytest.raises(ValueError, match="oversubscription must be a finite ratio >= 1"):
        fat_tree(4, 1, 64, oversubscription=0.5)
    with pytest.raises(ValueError, match="whole number of ports"):
        fat_tree(4, 1, 64.5)  # type: ignore[arg-type]  # a fractional radix is the error tested
    with pytest.raises(ValueError, match="levels must be 1, 2 or 3"):
        fat_tree(4, 1, 64, levels=4)
    with pytest.raises(ValueError, match="must be >= 1"):
        fat_tree(0, 8, 64)
    with pytest.raises(ValueError, match="single switch cannot hold"):
        fat_tree(9, 8, 64, levels=1)
    with pytest.raises(ValueError, match="use levels: 3"):
        fat_tree(1024, 8, 64, levels=2)
    with pytest.raises(ValueError, match="9 NICs per node do not fit on one leaf's 8 down ports"):
        fat_tree(4, 9, 16)


def test_forced_levels_above_minimum():
    t = fat_tree(4, 8, 64, levels=3)
    assert (t.levels, t.leaf_switches, t.pods, t.spine_switches, t.core_switches) == (3, 1, 1, 1, 1)


def test_radix_two():
    # k = 2: d = u = 1; 3 levels hold 2 * 1 * 1 = 2 = k^3/4 endpoints
    assert fat_tree(2, 1, 2).levels == 1
    with pytest.raises(ValueError):
        fat_tree(3, 1, 2)


def test_assumptions_state_cables():
    t = fat_tree(32, 8, 64)
    assert t.assumptions == ASSUMPTIONS
    assert any("copper" in a and "optical" in a for a in t.assumptions)


def test_pools_never_share_leaves():
    # pools of 1, 1, 1 and 8 nodes x 8 NICs (4 nodes per leaf): 1 + 1 + 1 + 2 = 5 leaves, where
    # one pool of 11 nodes would need ceil(11 / 4) = 3
    t = build_fat_tree([("a", 1, 8, False), ("b", 1, 8, False), ("c", 1, 8, False), ("d", 8, 8, False)], 64)
    assert t.leaf_switches == 5 and [g.first_leaf for g in t.groups] == [0, 1, 2, 3]
    assert fat_tree(11, 8, 64).leaf_switches == 3


@settings(max_examples=200, deadline=None)
@given(nodes=st.integers(1, 3000), nics=st.sampled_from([1, 2, 4, 8]), radix=st.sampled_from([8, 16, 40, 64]),
       ratio=st.sampled_from([1.0, 1.5, 2.0, 3.0]), rail=st.booleans(), step=st.integers(1, 50))
def test_more_nodes_never_fewer_switches(nodes, nics, radix, ratio, rail, step):
    def build(n):
        try:
            return fat_tree(n, nics, radix, oversubscription=ratio, rail_optimized=rail)
        except ValueError:
            return None
    small, big = build(nodes), build(nodes + step)
    if small is None:
        assert big is None  # what cannot be built stays unbuildable with more nodes
        return
    _invariants(small)
    if big is not None:
        _invariants(big)
        assert big.switches >= small.switches
        assert big.levels >= small.levels
        assert big.cables >= small.cables
        assert big.leaf_switches >= small.leaf_switches


def _invariants(t: FatTree):
    k = t.switch_radix
    assert t.endpoints <= t.max_endpoints
    assert t.node_leaf_cables == t.endpoints
    if t.levels == 1:
        assert t.endpoints <= k and t.switches == 1
        return
    assert t.leaf_down_ports + t.leaf_up_ports <= k
    assert t.leaf_spine_cables <= t.spine_switches * k
    assert t.leaf_switches <= (k if t.levels == 2 else k * (k // 2))
    assert t.leaf_spine_cables * t.oversubscription >= t.endpoints - 1e-6  # uplinks honour the ratio
    if t.levels == 3:
        assert t.spine_core_cables <= t.core_switches * k and t.pods <= k


# --- bisection -------------------------------------------------------------------------------------

def test_seed_bisection_target():
    # seed: (512 / 2) * 8 * 900 GB/s / 4 = 460.8 TB/s (900 GB/s = NVLink4 both directions)
    assert bisection_target_gbps(512, 8, 900) == 460_800.0
    assert bisection_target_gbps(512, 8, 900) / 1000 == 460.8


def test_delivered_bisection_by_hand():
    # 512 nodes x 8 NDR400, non-blocking: 4096 ports x 400 Gbit/s / 8 = 204,800 GB/s, both directions
    t = fat_tree(512, 8, 64)
    assert bisection_gbps(t, 400) == 204_800.0
    assert bisection_gbps(t, 400) / bisection_target_gbps(512, 8, 900) == pytest.approx(0.4444, abs=1e-4)
    # 2:1 -> 5 nodes (40 ports) per 42-down leaf, 20 uplinks; 102 full leaves + one of 2 nodes (8 up):
    # 2048 uplinks x 400 / 8 = 102,400 GB/s, half the non-blocking figure
    t2 = fat_tree(512, 8, 64, oversubscription=2)
    assert t2.leaf_spine_cables == 2048 and bisection_gbps(t2, 400) == 102_400.0
    # a 200G NIC on 400G ports is limited by the NICs
    assert bisection_gbps(t, 200, port_gbit=400) == 102_400.0
    # one switch is non-blocking
    assert bisection_gbps(fat_tree(32, 1, 64), 100) == 400.0


def test_spec_bisection():
    b = bisection(example("h200-256-ndr400"))
    # 256 x 400 / 8 = 12,800 GB/s delivered; 32/2 x 8 x (2 x 450) / 4 = 28,800 target
    assert (b.delivered_gbps, b.target_gbps) == (12_800.0, 28_800.0)
    assert b.ratio == pytest.approx(4 / 9)
    assert any("seed formula" in line for line in b.provenance)
    low = bisection(example("h200-256-100gbe"))
    assert low.delivered_gbps == 32 * 100 / 8 and low.target_gbps == 28_800.0


# --- tiers ---------------------------------------------------------------------------------------

def test_tiers_h200_ndr400():
    t = tiers(example("h200-256-ndr400"))
    assert list(t) == ["hbm", "scale-up", "scale-out", "scale-out-cross-leaf"]
    assert t["hbm"].gbps_per_direction == pytest.approx(4800) and t["hbm"].latency_us is None
    assert (t["scale-up"].gbps_per_direction, t["scale-up"].link) == (450, "NVLink4")
    assert t["scale-up"].latency_us == catalog.links.get("NVLink4").hop_latency_us.value
    assert t["scale-out"].latency_us == catalog.links.get("InfiniBand").hop_latency_us.value
    # 8 NICs x 400 Gbit/s / 8 bits / 8 GPUs = 50 GB/s per GPU per direction
    assert (t["scale-out"].gbps_per_direction, t["scale-out"].link) == (50, "InfiniBand")
    assert t["scale-out-cross-leaf"].gbps_per_direction == 50
    assert "NDR400.line_rate_gbit" in t["scale-out"].provenance
    assert "H200-SXM-141GB.scale_up.bandwidth_gbps_per_direction" in t["scale-up"].provenance
    assert "memory.bandwidth_tbps" in t["hbm"].provenance


def test_tiers_100gbe():
    t = tiers(example("h200-256-100gbe"))
    # 1 x 100 Gbit/s / 8 / 8 GPUs = 1.5625 GB/s; one switch, nothing crosses a leaf uplink
    assert t["scale-out"].gbps_per_direction == 1.5625 and t["scale-out"].link == "Ethernet"
    assert t["scale-out-cross-leaf"].gbps_per_direction == 1.5625
    assert "one switch" in t["scale-out-cross-leaf"].provenance


def test_tiers_oversubscribed():
    t = tiers(spec(count=32, oversubscription=2))
    assert t["scale-out"].gbps_per_direction == 50 and t["scale-out-cross-leaf"].gbps_per_direction == 25
    assert "oversubscription 2" in t["scale-out-cross-leaf"].provenance


def test_tiers_nic_faster_than_switch_port():
    # NDR400 NICs on 200G QM8700 ports link at 200G: 8 x 200 / 8 / 8 = 25 GB/s
    t = tiers(spec(count=4, switch="QM8700"))
    assert t["scale-out"].gbps_per_direction == 25 and "capped at QM8700.port_gbit" in t["scale-out"].provenance


def test_tiers_need_a_pool_name_when_mixed():
    s = example("mixed-h100-h200-mi300x")
    with pytest.raises(ValueError, match="has 3 pools"):
        tiers(s)
    assert tiers(s, "mi300x")["scale-up"].link == "InfinityFabric"
    with pytest.raises(UserError, match="unknown node pool"):
        tiers(s, "nope")


# --- hops ------------------------------------------------------------------------------------------

def test_hops_plain_fat_tree():
    s = example("h200-256-ndr400")  # 4 nodes (32 GPUs) per leaf
    assert hops(s, 5, 5) == 0 and route(s, 5, 5) == Route("self", 0)
    assert hops(s, 0, 7) == 1       # same NVLink domain
    assert hops(s, 0, 8) == 1       # node 0 and node 1 share leaf 0
    assert hops(s, 0, 31) == 1      # node 3, still leaf 0
    assert hops(s, 0, 32) == 3      # node 4 is on leaf 1: leaf-spine-leaf
    assert hops(s, 255, 0) == 3


def test_hops_rail_optimized():
    s = example("ng8-32node")
    assert hops(s, 0, 8) == 1       # GPU 0 of nodes 0 and 1: both on rail 0's leaf
    assert hops(s, 0, 9) == 3       # rail 0 to rail 1 crosses a spine (no PXN)


def test_hops_three_levels():
    s = spec(count=1024)            # 8192 ports on 64-port switches: 3 levels, 4 nodes per leaf,
    assert fabric_of(s).levels == 3  # 32 leaves = 128 nodes = 1024 GPUs per pod
    assert hops(s, 0, 32) == 3
    assert hops(s, 0, 1023) == 3
    assert hops(s, 0, 1024) == 5


def test_hops_single_switch_and_range():
    s = example("h200-256-100gbe")
    assert hops(s, 0, 255) == 1
    with pytest.raises(ValueError, match=r"out of range 0\.\.255"):
        hops(s, 0, 256)


def test_hops_rack_scale_domain():
    # 72 GB200 nodes x 4 GPUs = 4 NVL72 racks; 288 XDR800 ports on 144-port Q3400: d = 72 ports =
    # 18 nodes (one rack) per leaf
    s = spec(count=72, gpu="GB200", gpus_per_node=4, nics=4, nic="XDR800", switch="Q3400")
    assert route(s, 0, 71) == Route("scale-up", 1)     # one NVL72 rack = 18 nodes
    assert route(s, 0, 72) == Route("spine", 3)        # next rack, next leaf
    assert locate(s, 72).domain == ("p", 1)
    small = spec(count=36, gpu="GB200", gpus_per_node=4, nics=4, nic="XDR800", switch="Q3400")
    assert route(small, 0, 72) == Route("leaf", 1)     # 144 ports: one switch


def test_locate():
    s = example("mixed-h100-h200-mi300x")
    loc = locate(s, 16 * 8 + 3)     # first h200 node, GPU 3
    assert (loc.pool, loc.node, loc.node_in_pool, loc.local_gpu, loc.nic) == ("h200", 16, 0, 3, 3)


# --- scale-out view --------------------------------------------------------------------------------

def test_scale_out_view():
    v = scale_out_view(example("h200-256-ndr400"), "h200")
    assert (v.gpus_per_node, v.domain_size, v.scale_up_gbps_per_direction, v.scale_up_link) == (8, 8, 450, "NVLink4")
    assert v.in_switch_reduction is True
    assert (v.nic_gbps_per_gpu_per_direction, v.scale_out_link) == (50, "InfiniBand")
    assert (v.nodes_per_leaf, v.oversubscription, v.nodes) == (4, 1.0, 32)


def test_scale_out_view_mixed_and_single_switch():
    s = example("mixed-h100-h200-mi300x")
    mi = scale_out_view(s, "mi300x")
    assert (mi.scale_up_link, mi.in_switch_reduction, mi.nodes, mi.nodes_per_leaf) == \
        ("InfinityFabric", False, 8, 8)
    assert scale_out_view(s, "h100").nodes_per_leaf == 16
    eth = scale_out_view(example("h200-256-100gbe"))
    assert (eth.nodes_per_leaf, eth.oversubscription, eth.nic_gbps_per_gpu_per_direction) == (32, 1.0, 1.5625)
    assert scale_out_view(spec(count=32, oversubscription=2)).oversubscription == 2.0
