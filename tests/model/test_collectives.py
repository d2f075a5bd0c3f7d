"""The collective model against hand-computed values, published expectations and invariants."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Link, Ramp, Source, Sourced
from gpucluster.model.collectives import (OPS, CommGroup, Tier, bus_factor, candidates, predict,
                                          ring_steps)
from gpucluster.model.placement import nic_gbps_per_gpu, place_group

GiB = 2**30
SRC = {"s": Source(title="test", kind="estimate", date="2026-01-01")}


def ideal_link(kind: str = "scale-up", eff: float = 1.0, half: float = 0.0, k: float = 1.0,
               base_us: float = 0.0, hop_us: float = 0.0) -> Link:
    """A link with textbook alpha-beta behaviour, for hand-computed checks."""
    v = lambda x: Sourced(value=x, source="s")  # noqa: E731
    ramp = Ramp(efficiency=v(eff), half_bytes=v(half), ramp_exponent=v(k))
    return Link(name="ideal", kind=kind, base_latency_us=v(base_us), hop_latency_us=v(hop_us), ring=ramp,
                in_switch=ramp, sources=SRC)


def h100_node(gpus=8):
    return place_group(catalog.gpus.get("H100"), gpus, 8)


def test_bus_factors_match_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("all_to_all", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == bus_factor("send_recv", 2) == 1.0
    assert ring_steps("all_reduce", 8) == 14 and ring_steps("all_gather", 8) == 7


def test_alpha_beta_by_hand():
    # 8 GPUs, ring all-reduce of 1 GB on 100 GB/s links, 10 us base + 1 us per step:
    # t = 10 us + 14 * 1 us + 1.75e9 B / 100e9 B/s = 24 us + 17.5 ms
    g = CommGroup(8, 8, Tier(ideal_link(base_us=10, hop_us=1), 100.0))
    p = predict("all_reduce", 1e9, g, "ring")
    assert p.time_s == pytest.approx(24e-6 + 0.0175)
    assert p.algbw_gbps == pytest.approx(1e9 / p.time_s / 1e9)
    assert p.busbw_gbps == pytest.approx(1.75 * p.algbw_gbps)


def test_ramp_halves_bandwidth_at_half_bytes():
    g = CommGroup(2, 2, Tier(ideal_link(half=1e6, k=0.7), 100.0))
    # send_recv moves w = S; at S = half_bytes the transfer takes twice w/B.
    p = predict("send_recv", 1e6, g)
    assert p.time_s == pytest.approx(2 * 1e6 / 100e9)


def test_h100_node_matches_nvidia_expectations():
    """nccl-tests issue 212: ~480 GB/s all-reduce busbw with NVLS above 256 MB, ~370 with rings."""
    g = h100_node()
    assert predict("all_reduce", 8 * GiB, g).busbw_gbps == pytest.approx(480, rel=0.05)
    assert predict("all_reduce", 8 * GiB, g).algorithm == "nvls"
    assert predict("all_reduce", 8 * GiB, g, "ring").busbw_gbps == pytest.approx(370, rel=0.05)


def test_a100_node_peaks_near_230():
    """REFERENCE.md: an A100 node's all-reduce peaks near 230 GB/s busbw (no NVLS on A100)."""
    g = place_group(catalog.gpus.get("A100-SXM4-80GB"), 8, 8)
    p = predict("all_reduce", 8 * GiB, g)
    assert p.algorithm == "ring"
    assert p.busbw_gbps == pytest.approx(230, rel=0.08)
    assert "nvls" not in candidates("all_reduce", g)


def test_multi_node_ring_is_limited_by_the_nodes_nics():
    """NCCL spreads its rings' node crossings over the rails, so NCCL_ALGO=RING across nodes
    is bounded by a node's NICs together: 8 x HDR200 = 200 GB/s for an A100 node (Azure's
    ND A100 v4 reports about 185 GB/s busbw across nodes)."""
    gpu = catalog.gpus.get("A100-SXM4-80GB")
    g = place_group(gpu, 64, 8, scale_out_link="InfiniBand", scale_out_gbps_per_gpu=nic_gbps_per_gpu(200, 8, 8))
    p = predict("all_reduce", 8 * GiB, g, "ring")
    assert p.bottleneck == "scale-out"
    assert 0.85 * 180 < p.busbw_gbps <= 0.9 * 200
    # One NIC per node instead of eight: the same ring is eight times slower across nodes.
    thin = place_group(gpu, 64, 8, scale_out_link="InfiniBand", scale_out_gbps_per_gpu=nic_gbps_per_gpu(200, 1, 8))
    assert predict("all_reduce", 8 * GiB, thin, "ring").busbw_gbps == pytest.approx(p.busbw_gbps / 8, rel=0.01)


def test_100gbe_is_far_slower_than_ndr400():
    """The seed's case study: the same 256 H200 on 100 GbE instead of 8 x 400G InfiniBand."""
    gpu = catalog.gpus.get("H200")
    fast = place_group(gpu, 256, 8, scale_out_link="InfiniBand", scale_out_gbps_per_gpu=nic_gbps_per_gpu(400, 8, 8))
    slow = place_group(gpu, 256, 8, scale_out_link="Ethernet", scale_out_gbps_per_gpu=nic_gbps_per_gpu(100, 1, 8))
    t_fast = predict("all_reduce", 1 * GiB, fast).time_s
    t_slow = predict("all_reduce", 1 * GiB, slow).time_s
    assert t_slow > 10 * t_fast


def test_mesh_subgroup_uses_its_share_of_links():
    """MI300X: a pair of GPUs talks over one of the 7 Infinity Fabric links."""
    gpu = catalog.gpus.get("MI300X")
    pair = place_group(gpu, 2, 8)
    full = place_group(gpu, 8, 8)
    assert pair.scale_up_gbps == pytest.approx(full.scale_up_gbps / 7)


def test_single_gpu_costs_nothing():
    p = predict("all_reduce", 1e9, h100_node(1))
    assert p.time_s == 0 and p.busbw_gbps == 0


def test_bad_requests():
    with pytest.raises(ValueError, match="unknown collective"):
        predict("allreduce", 1e6, h100_node())
    with pytest.raises(ValueError, match="does not apply"):
        predict("all_gather", 1e6, h100_node(), "nvls")
    with pytest.raises(ValueError, match="no scale-out"):
        CommGroup(16, 8, Tier(ideal_link(), 100.0))
    with pytest.raises(ValueError, match="evenly"):
        CommGroup(12, 8, Tier(ideal_link(), 100.0), Tier(ideal_link("scale-out"), 50.0))
    with pytest.raises(ValueError, match=">= 0"):
        predict("all_reduce", -1, h100_node())


sizes = st.floats(min_value=1, max_value=16 * GiB, allow_nan=False)
ops = st.sampled_from(OPS)
groups = st.sampled_from([(8, 8), (16, 8), (64, 8), (2, 2), (4, 4), (256, 8)])
links = st.sampled_from(["NVLink3", "NVLink4", "InfinityFabric", "PCIe5"])
nets = st.sampled_from(["InfiniBand", "RoCE", "Ethernet"])


def make_group(n, per, up, net, up_gbps=300.0, out_gbps=50.0):
    l_up = catalog.links.get(up)
    return CommGroup(n, per, Tier(l_up, up_gbps), Tier(catalog.links.get(net), out_gbps),
                     in_switch_reduction=l_up.in_switch is not None)


@settings(max_examples=300, deadline=None)
@given(op=ops, a=sizes, b=sizes, shape=groups, up=links, net=nets)
def test_a_larger_message_never_takes_less_time(op, a, b, shape, up, net):
    g = make_group(shape[0], shape[1], up, net)
    small, large = sorted((a, b))
    assert predict(op, large, g).time_s >= predict(op, small, g).time_s


@settings(max_examples=300, deadline=None)
@given(op=ops, size=sizes, shape=groups, up=links, net=nets,
       bw=st.floats(min_value=1, max_value=2000), more=st.floats(min_value=1.0, max_value=10.0))
def test_more_bandwidth_is_never_slower(op, size, shape, up, net, bw, more):
    for up_gbps, out_gbps in ((bw, 50.0), (300.0, bw)):
        slow = make_group(shape[0], shape[1], up, net, up_gbps, out_gbps)
        fast = make_group(shape[0], shape[1], up, net, up_gbps * (more if up_gbps == bw else 1),
                          out_gbps * (more if out_gbps == bw and up_gbps != bw else 1))
        assert predict(op, size, fast).time_s <= predict(op, size, slow).time_s * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(size=sizes, shape=groups, up=links, net=nets)
def test_ring_busbw_never_exceeds_the_slowest_link(size, shape, up, net):
    g = make_group(shape[0], shape[1], up, net)
    p = predict("all_reduce", size, g, "ring")
    limit = g.scale_up_gbps * g.scale_up.link.ring.efficiency.value
    if g.domains > 1:  # the domain's NICs share the ring's crossings
        limit = min(limit, g.per_domain * g.scale_out_gbps * g.scale_out.link.ring.efficiency.value)
    assert p.busbw_gbps <= limit * (1 + 1e-6)
    assert math.isfinite(p.time_s) and p.time_s > 0


def test_arrays_and_scalars_agree():
    g = h100_node()
    arr = predict("all_gather", np.array([1e3, 1e6, 1e9]), g)
    for i, s in enumerate([1e3, 1e6, 1e9]):
        assert predict("all_gather", s, g).time_s == pytest.approx(np.atleast_1d(arr.time_s)[i])


def test_one_gpu_per_domain_crosses_only_the_network():
    """A mesh or 2-GPU-domain chip with one group member per domain: finite, NIC-bound times
    (this once divided by zero: a sub-group of one has no NVLink share)."""
    for name, domain in (("MI300X", 8), ("H100-PCIe", 2)):
        gpu = catalog.gpus.get(name)
        g = place_group(gpu, 4, domain, domain_size=domain, scale_out_link="InfiniBand", scale_out_gbps_per_gpu=50.0)
        g = CommGroup(4, 1, g.scale_up, g.scale_out, domain_size=domain, switched=gpu.scale_up.switched)
        p = predict("all_reduce", 1e9, g)
        assert math.isfinite(p.time_s) and p.bottleneck == "scale-out"
        assert p.busbw_gbps <= 50 * 0.9


def test_scalar_fast_path_equals_the_array_model():
    import random

    from gpucluster.model.collectives import OPS, predict, predict_time_s
    from gpucluster.model.training.fabric import TrainingFabric

    rnd = random.Random(7)
    fabs = [TrainingFabric("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0), TrainingFabric("A100-SXM4-80GB", 8, 8, "RoCE", 12.5),
            TrainingFabric("MI300X", 8, 8, "InfiniBand", 50.0), TrainingFabric("GB200", 4, 72, "InfiniBand", 50.0)]
    for _ in range(400):
        fab = rnd.choice(fabs)
        n = rnd.choice([2, 4, 8, 16, 64, 256])
        stride = rnd.choice([1, 2, 8])
        op = rnd.choice(OPS)
        size = 10 ** rnd.uniform(0, 10)
        group = fab.group(2, stride) if op == "send_recv" else fab.group(n, stride)
        assert predict_time_s(op, size, group) == pytest.approx(float(predict(op, size, group).time_s), rel=1e-9)


def test_array_times_equal_predict():
    """predict_times_s (the serving tables' path) is predict's time_s, size by size."""
    import numpy as np

    from gpucluster.model.collectives import OPS, predict, predict_time_s, predict_times_s
    from gpucluster.model.training.fabric import TrainingFabric

    sizes = np.logspace(0, 10, 41)
    for fab in (TrainingFabric("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0), TrainingFabric("MI300X", 8, 8, "RoCE", 12.5)):
        for op in OPS:
            for n, stride in ((2, 1), (8, 1), (16, 1), (4, 8)):
                group = fab.group(2, stride) if op == "send_recv" else fab.group(n, stride)
                got = predict_times_s(op, sizes, group)
                assert np.array_equal(got, predict(op, sizes, group).time_s)
                assert got == pytest.approx([predict_time_s(op, s, group) for s in sizes.tolist()], rel=1e-12)
    with pytest.raises(ValueError, match="unknown collective"):
        predict_times_s("all_reduce_x", sizes, group)
    with pytest.raises(ValueError, match=">= 0"):
        predict_times_s("all_reduce", -sizes, group)
