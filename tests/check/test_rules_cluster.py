"""Cluster-level rules: each with a spec that triggers it and one that does not."""

from __future__ import annotations

import pytest
from check_helpers import BASE, findings, ids, spec_with

from gpucluster.check.rules import RULES


def test_every_rule_is_registered():
    assert len(RULES) >= 18
    for name, cls in RULES.items():
        assert cls.id == name and cls.summary


# --- scale-out bandwidth (the seed's "match or exceed" rule) -----------------------------------

def test_scale_out_bandwidth_100gbe(tmp_path):
    # the seed's case study: 32 nodes of 8 H200 behind one 100 GbE port each
    spec = spec_with(**{"node_pools.0.nic": "Ethernet-100G", "node_pools.0.nics_per_node": 1,
                        "node_pools.0.count": 32, "fabric.switch": "SN4600C"})
    [f] = findings(tmp_path, "scale-out-bandwidth", spec, model=None)     # the default 70B
    assert f.severity in ("warning", "error") and "default" in f.evidence["model"]
    assert f.evidence["ratio"] == pytest.approx(12.5 / 8 / 450, abs=1e-4)
    assert f.evidence["slowdown"] > 1.1 and "step" in f.title


def test_scale_out_bandwidth_reference_design_is_info(tmp_path):
    [f] = findings(tmp_path, "scale-out-bandwidth")
    assert f.severity == "info" and f.evidence["ratio"] == pytest.approx(50 / 450, abs=1e-3)


def test_scale_out_bandwidth_single_node_clean(tmp_path):
    assert findings(tmp_path, "scale-out-bandwidth", spec_with(**{"node_pools.0.count": 1})) == []


# --- Ethernet / RoCE ---------------------------------------------------------------------------

def test_ethernet_and_roce(tmp_path):
    tcp = spec_with(**{"node_pools.0.nic": "Ethernet-400G", "fabric.switch": "SN5600-400G"})
    [f] = findings(tmp_path, "ethernet-training", tcp)
    assert f.severity == "error" and f.evidence["busbw_gbps"] < f.evidence["busbw_gbps_on_infiniband"]
    roce = spec_with(**{"node_pools.0.nic": "RoCE-400G", "fabric.switch": "SN5600-400G"})
    assert ids(findings(tmp_path, "ethernet-training", roce)) == [("ethernet-training", "warning")]


def test_infiniband_clean(tmp_path):
    assert findings(tmp_path, "ethernet-training") == []


# --- oversubscription --------------------------------------------------------------------------

def test_oversubscribed(tmp_path):
    spec = spec_with(**{"fabric.oversubscription": 4, "node_pools.0.count": 16, "fabric.nodes_per_leaf": 2})
    [f] = findings(tmp_path, "oversubscribed-fabric", spec)
    assert f.evidence["cross_leaf_gbps_per_gpu"] == pytest.approx(50 / 4)
    assert f.evidence["slowdown"] >= 1.0


def test_non_blocking_clean(tmp_path):
    assert findings(tmp_path, "oversubscribed-fabric", spec_with(**{"node_pools.0.count": 16})) == []


# --- power and cooling ------------------------------------------------------------------------

def test_rack_power_over_budget(tmp_path):
    [f] = findings(tmp_path, "rack-power", spec_with(**{"facility.rack_kw_budget": 20}))
    assert f.severity == "error" and f.evidence["rack_kw"] > 20 and f.evidence["nodes_that_fit"] == 1
    assert "cluster.yaml:" in f.where


def test_rack_power_within_budget(tmp_path):
    assert findings(tmp_path, "rack-power", spec_with(**{"facility.rack_kw_budget": 41})) == []
    assert findings(tmp_path, "rack-power", spec_with(facility=None)) == []


def test_208v_single_phase(tmp_path):
    [f] = findings(tmp_path, "power-feed", spec_with(**{"facility.voltage_v": 208, "facility.phases": 1}))
    assert f.severity == "error" and f.evidence["circuits"] == 9 and f.evidence["circuits_at_480v_3ph"] == 3


def test_three_phase_clean(tmp_path):
    assert findings(tmp_path, "power-feed") == []


def test_air_cooling_density(tmp_path):
    [f] = findings(tmp_path, "air-cooling", spec_with(**{"facility.cooling": "air"}))
    assert f.evidence["rack_kw"] > f.evidence["air_limit_kw"] == 30
    assert findings(tmp_path, "air-cooling", spec_with(**{"facility.cooling": "air",
                                                          "facility.nodes_per_rack": 2})) == []


# --- storage ----------------------------------------------------------------------------------

def _big_nfs(write=1.0):
    return spec_with(**{"node_pools.0.count": 128, "storage": [
        {"kind": "nfs", "name": "nfs", "capacity_tb": 500, "read_gbps": 2, "write_gbps": write, "latency_ms": 5}]})


def test_checkpoint_tier_too_slow(tmp_path):
    [f] = findings(tmp_path, "checkpoint-tier", _big_nfs(), model="llama3.1-405b")
    assert f.severity == "error" and f.evidence["goodput"] < 0.8
    assert f.evidence["write_s"] == pytest.approx(405.85e9 * 14 / 1e9, rel=0.01)


def test_checkpoint_tier_fast_enough(tmp_path):
    assert findings(tmp_path, "checkpoint-tier", _big_nfs(write=500.0), model="llama3.1-405b") == []
    assert findings(tmp_path, "checkpoint-tier") == []


def test_checkpoint_tier_without_storage_or_durable_tier(tmp_path):
    assert ids(findings(tmp_path, "checkpoint-tier", spec_with(storage=[]))) == [("checkpoint-tier", "warning")]
    local = spec_with(storage=[BASE["storage"][0]])
    [f] = findings(tmp_path, "checkpoint-tier", local)
    assert "local NVMe" in f.title


def test_storage_feed(tmp_path):
    nfs = spec_with(storage=[{"kind": "nfs", "name": "nfs", "capacity_tb": 100, "read_gbps": 2, "write_gbps": 1,
                              "latency_ms": 5}])
    [f] = findings(tmp_path, "storage-feed", nfs, input_gbps_per_gpu=0.3)
    assert f.severity == "error" and f.evidence["need_gbps"] == pytest.approx(32 * 0.3)
    # text tokens are a few MB/s: the same NFS keeps an LLM fed
    assert findings(tmp_path, "storage-feed", nfs) == []
    assert findings(tmp_path, "storage-feed", input_gbps_per_gpu=0.3) == []


# --- the model --------------------------------------------------------------------------------

def test_model_does_not_fit(tmp_path):
    [f] = findings(tmp_path, "model-fit", spec_with(**{"node_pools.0.count": 1}), model="megatron-gpt-1t")
    assert f.severity == "error" and "fits on no layout" in f.title


def test_model_fits(tmp_path):
    assert findings(tmp_path, "model-fit") == []


def test_rack_power_slightly_over_is_a_warning(tmp_path):
    # A node summed from parts (4 x H200 has no vendor system figure) may be up to 5% over.
    [f] = findings(tmp_path, "rack-power", spec_with(**{"node_pools.0.gpu": "H200:4", "facility.rack_kw_budget": 18.5}))
    assert f.severity == "warning" and "uncertainty" in f.title


def test_three_dgx_h100_over_30_kw_is_an_error_with_two_per_rack(tmp_path):
    # DGX H100 maximum 10.2 kW (NVIDIA datasheet): 3 x 10.2 = 30.6 kW > 30, so 2 fit per rack.
    [f] = findings(tmp_path, "rack-power", spec_with(**{"node_pools.0.gpu": "H100:8", "facility.nodes_per_rack": 3,
                                                         "facility.rack_kw_budget": 30}))
    assert f.severity == "error" and f.evidence["nodes_that_fit"] == 2 and abs(f.evidence["rack_kw"] - 30.6) < 1e-6
