"""Facility model: node and rack power, the feed, cooling, storage feed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpucluster.catalog.operations import facility_limits, price_book
from gpucluster.errors import UserError
from gpucluster.model.facility import (bytes_per_token, circuit_kw, facility_report, feed_current_a, input_gbps,
                                       match_cpu, node_power, system_book)
from gpucluster.specs.cluster import ClusterSpec, load_cluster

ROOT = Path(__file__).resolve().parents[2]
HOST_W = price_book().host_base_w.value


def spec(voltage=480, phases=3, budget=30, per_rack=4, cooling="air", cpu="AMD EPYC 9654", gpu="H200:8"):
    return ClusterSpec.model_validate({
        "name": "t",
        "node_pools": [{"name": "p", "count": 8, "gpu": gpu, "cpu": cpu, "cpu_sockets": 2, "cpu_cores": 192,
                        "ram_gib": 1024, "nics_per_node": 8, "nic": "NDR400"}],
        "fabric": {"switch": "QM9700"},
        "facility": {"rack_kw_budget": budget, "nodes_per_rack": per_rack, "voltage_v": voltage, "phases": phases,
                     "pue": 1.3, "usd_per_kwh": 0.1, "cooling": cooling},
    })


def test_node_power_by_parts():
    p = spec().node_pools[0]
    n = node_power(p, 1000)
    assert n.gpus_w == 8 * 700 and n.cpus_w == 2 * 360 and n.nics_w == 8 * 25 and n.host_base_w == 1000
    assert n.parts_w == pytest.approx(7520)
    # 8 x H200 is a DGX H200-class system: its rated maximum (10.2 kW), not the parts' 7.52 kW
    assert n.system == "DGX H200" and n.kw == pytest.approx(10.2) and not n.estimate
    assert "10.2 kW" in n.provenance[0] and "datasheet" in n.provenance[0]


@pytest.mark.parametrize("gpu, system, kw", [("H100:8", "DGX H100", 10.2), ("H200:8", "DGX H200", 10.2),
                                             ("B200:8", "DGX B200", 14.3), ("A100-SXM4-80GB:8", "DGX A100 80GB", 6.5),
                                             ("A100-SXM4-40GB:8", "DGX A100 40GB", 6.5)])
def test_vendor_system_maximums(gpu, system, kw):
    n = node_power(spec(gpu=gpu).node_pools[0], HOST_W)
    assert (n.system, n.kw, n.estimate) == (system, pytest.approx(kw), False)


def test_mi300x_platform_is_labelled_an_estimate():
    n = node_power(spec(gpu="MI300X:8").node_pools[0], HOST_W)
    assert n.system and n.estimate and "estimate" in n.provenance[0]


def test_other_nodes_are_an_estimate_from_parts():
    for gpu in ("H100:4", "L40S:4"):
        n = node_power(spec(gpu=gpu).node_pools[0], HOST_W)
        assert n.system is None and n.estimate and n.kw == pytest.approx(n.parts_w / 1000)
        assert n.provenance[0].startswith("estimate:")


def test_three_dgx_h100_do_not_fit_30_kw():
    """3 x 10.2 kW = 30.6 kW > 30 kW: two nodes per rack (the parts' 7.5 kW said three)."""
    r = facility_report(spec(gpu="H100:8", budget=30, per_rack=3), facility_limits(), HOST_W).racks[0]
    assert r.rack_kw == pytest.approx(30.6) and r.over_budget and r.nodes_that_fit == 2


def test_every_system_cites_a_dated_source():
    book = system_book()
    assert len(book.systems) >= 6
    for s in book.systems:
        src = book.sources[s.max_kw.source]
        assert src.date and src.title
        assert src.kind == ("estimate" if s.gpu.startswith("MI") else "datasheet"), s.name


def test_broken_systems_entry_is_named(tmp_path):
    from gpucluster.catalog.operations import DATA_DIR
    bad = tmp_path / "facility.yaml"
    bad.write_text((DATA_DIR / "facility.yaml").read_text().replace("gpu: B200,", "gpu: B2000,"))
    with pytest.raises(UserError) as exc:
        system_book(bad)
    assert exc.value.field == "systems[2].gpu" and "B2000" in exc.value.reason
    bad.write_text((DATA_DIR / "facility.yaml").read_text().replace("source: nvidia-dgx-b200}", "source: nvidia-dgx}"))
    with pytest.raises(UserError) as exc:
        system_book(bad)
    assert exc.value.field == "systems[2].max_kw.source"


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
    assert bad.rack_kw == good.rack_kw == pytest.approx(4 * 10.2)
    assert bad.circuits == math.ceil(bad.rack_kw / circuit_kw(208, 1, 30, 0.8, 0.95)) == 9
    assert good.circuits == 3 and bad.circuits_at_480v_3ph == 3


def test_rack_budget_and_cooling():
    lim = facility_limits()
    r = facility_report(spec(budget=20), lim, HOST_W).racks[0]
    assert r.over_budget and r.nodes_that_fit == 1 and r.racks == 2
    r = facility_report(spec(budget=45, cooling="air"), lim, HOST_W).racks[0]
    assert not r.over_budget and r.air_too_dense                # 40.8 kW > 30 kW air limit (seed)
    r = facility_report(spec(budget=45, cooling="liquid"), lim, HOST_W).racks[0]
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
