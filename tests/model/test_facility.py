"""Facility model: node and rack power, the feed, cooling, storage feed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpucluster.catalog.operations import facility_limits, price_book
from gpucluster.model.facility import (bytes_per_token, circuit_kw, facility_report, feed_current_a, input_gbps,
                                       match_cpu, node_power)
from gpucluster.specs.cluster import ClusterSpec, load_cluster

ROOT = Path(__file__).resolve().parents[2]
HOST_W = price_book().host_base_w.value


def spec(voltage=480, phases=3, budget=30, per_rack=4, cooling="air", cpu="AMD EPYC 9654"):
    return ClusterSpec.model_validate({
        "name": "t",
        "node_pools": [{"name": "p", "count": 8, "gpu": "H200:8", "cpu": cpu, "cpu_sockets": 2, "cpu_cores": 192,
                        "ram_gib": 1024, "nics_per_node": 8, "nic": "NDR400"}],
        "fabric": {"switch": "QM9700"},
        "facility": {"rack_kw_budget": budget, "nodes_per_rack": per_rack, "voltage_v": voltage, "phases": phases,
                     "pue": 1.3, "usd_per_kwh": 0.1, "cooling": cooling},
    })


def test_node_power_by_parts():
    p = spec().node_pools[0]
    n = node_power(p, 1000)
    assert n.gpus_w == 8 * 700 and n.cpus_w == 2 * 360 and n.nics_w == 8 * 25 and n.host_base_w == 1000
    assert n.kw == pytest.approx(7.52)
    # seed 1: "each node pulls 7.2kW"; DGX H200 is rated 10.2 kW maximum
    assert 7.2 <= n.kw <= 10.2


def test_cpu_matching():
    assert match_cpu("AMD EPYC 9654", 96)[0].name == "EPYC-9654"
    assert match_cpu("Intel Xeon Platinum 8480C", 48)[0].name == "Xeon-8480+"
    cpu, why = match_cpu("Some CPU 7", 64)
    assert cpu.name == "EPYC-7742" and "not in the catalog" in why


def test_feed_formulas():
    # 28.8 kW at 208 V single-phase, pf 0.95: 145.7 A; at 480 V three-phase: 36.5 A
    assert feed_current_a(28.8, 208, 1, 0.95) == pytest.approx(145.7, abs=0.1)
    assert feed_current_a(28.8, 480, 3, 0.95) == pytest.approx(36.5, abs=0.1)
    assert circuit_kw(208, 1, 30, 0.8, 0.95) == pytest.approx(4.74, abs=0.01)
    assert circuit_kw(480, 3, 30, 0.8, 0.95) == pytest.approx(18.95, abs=0.01)


def test_208v_single_phase_needs_many_circuits():
    lim = facility_limits()
    bad = facility_report(spec(voltage=208, phases=1), lim, HOST_W).racks[0]
    good = facility_report(spec(), lim, HOST_W).racks[0]
    assert bad.rack_kw == good.rack_kw
    assert bad.circuits == math.ceil(bad.rack_kw / circuit_kw(208, 1, 30, 0.8, 0.95)) == 7
    assert good.circuits == 2 and bad.circuits_at_480v_3ph == 2


def test_rack_budget_and_cooling():
    lim = facility_limits()
    r = facility_report(spec(budget=20), lim, HOST_W).racks[0]
    assert r.over_budget and r.nodes_that_fit == 2 and r.racks == 2
    r = facility_report(spec(budget=40, cooling="air"), lim, HOST_W).racks[0]
    assert not r.over_budget and r.air_too_dense                # 30.1 kW > 30 kW air limit (seed)
    r = facility_report(spec(budget=40, cooling="liquid"), lim, HOST_W).racks[0]
    assert not r.air_too_dense


def test_totals_include_switches_and_pue():
    s = load_cluster(ROOT / "examples" / "ng8-32node.yaml")
    rep = facility_report(s, facility_limits(), HOST_W)
    assert rep.switches_kw == pytest.approx(12 * 0.75)
    assert rep.it_kw == pytest.approx(32 * rep.racks[0].node.kw + rep.switches_kw)
    assert rep.facility_kw == pytest.approx(rep.it_kw * 1.3)


def test_storage_feed():
    lim = facility_limits()
    assert bytes_per_token(128256, lim) == 4 and bytes_per_token(32000, lim) == 2
    # 256 GPUs at 3,000 tokens/s of 4-byte ids: 3 MB/s; text never strains a file system
    assert input_gbps(256, 3000, 4) == pytest.approx(0.003072)
