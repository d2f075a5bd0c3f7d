"""Serving search: replicas for a rate within SLOs, cost from the catalog, what binds."""

import math

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.queueing import Lengths, Traffic
from gpucluster.plan.fabric_from import from_flags
from gpucluster.plan.serve_search import search
from gpucluster.specs.workload import TransformerSpec, load_model_spec


@pytest.fixture(scope="module")
def h100():
    return from_flags("H100:8", 1, "NDR400", None).fabric


def test_70b_at_1000_requests_per_second(h100):
    rate = 1000
    t = Traffic(rate, Lengths(512), Lengths(256))
    res = search(load_model_spec("llama3-70b"), [h100], rate, t, quant=Quant("fp8", "fp8"), slo_ttft=0.5, slo_tpot=0.05)
    best = res.best
    assert best is not None
    assert best.replicas * best.per_replica_rate >= rate * 0.999
    assert best.point.tpot_p99 is not None
    assert best.point.ttft_p99 <= 0.5 and best.point.tpot_p99 <= 0.05
    for o in res.options:
        assert o.tp * o.pp == o.gpus_per_replica and o.gpus == o.replicas * o.gpus_per_replica
    costs = [o.usd_per_hour for o in res.options]
    assert None not in costs and costs == sorted(c for c in costs if c is not None)
    rental = catalog.gpus.get("H100").prices.rental_usd_per_gpu_hour
    assert rental is not None
    price = rental.value
    assert best.usd_per_hour == pytest.approx(best.gpus * price)
    assert best.usd_per_mtok(rate, 256) == pytest.approx(best.gpus * price / (rate * 256 * 3600) * 1e6)
    assert best.price_source is not None and "Lambda" in best.price_source
    # TP1 cannot hold the 70B weights with room for a sequence in bf16
    bf = search(load_model_spec("llama3-70b"), [h100], 10, Traffic(10, Lengths(512), Lengths(256)))
    assert any(r.reason == "memory" and r.tp == 1 and r.pp == 1 for r in bf.rejected)


def test_405b_fits_on_no_single_node_replica(h100):
    res = search(load_model_spec("llama3.1-405b"), [h100], 1, Traffic(1, Lengths(512), Lengths(128)),
                 max_gpus_per_replica=8)
    assert res.best is None and res.rejected and all(r.reason == "memory" for r in res.rejected)


def test_slo_no_one_meets(h100):
    res = search(load_model_spec("llama3-8b"), [h100], 10, Traffic(10, Lengths(512), Lengths(64)), slo_tpot=1e-4)
    assert res.best is None
    assert {r.reason for r in res.rejected} == {"TPOT SLO"}
    assert min(r.needed for r in res.rejected) > 1e-3


def test_more_rate_more_replicas(h100):
    spec = load_model_spec("llama3-8b")
    few = search(spec, [h100], 50, Traffic(50, Lengths(256), Lengths(128)), slo_tpot=0.05).best
    many = search(spec, [h100], 500, Traffic(500, Lengths(256), Lengths(128)), slo_tpot=0.05).best
    assert few is not None and many is not None
    assert many.gpus > few.gpus
    cost_many, cost_few = many.usd_per_mtok(500, 128), few.usd_per_mtok(50, 128)
    assert cost_many is not None and cost_few is not None and cost_many <= cost_few * 1.5


def test_binding_names_a_resource_or_slo(h100):
    res = search(load_model_spec("llama3-8b"), [h100], 100, Traffic(100, Lengths(512), Lengths(256)))
    assert res.best is not None
    b = res.best.binding
    assert b.startswith(("compute", "HBM bandwidth", "interconnect", "kernel", "memory")), b
    slo = search(load_model_spec("llama3-8b"), [h100], 100, Traffic(100, Lengths(512), Lengths(256)), slo_ttft=0.06)
    assert slo.best is not None and slo.best.binding == "SLO (TTFT p99)"


def test_cpu_nodes_compete_for_a_small_classifier(h100):
    spec = TransformerSpec(layers=12, hidden=768, heads=12, vocab=30522, seq_len=512, tied_embeddings=True)
    t = Traffic(5000, Lengths(128), Lengths(1))
    res = search(spec, [h100], 5000, t, slo_ttft=0.02, cpus=[(catalog.cpus.get("EPYC-9654"), 2)])
    cpu = [o for o in res.options if "EPYC" in o.hardware]
    assert cpu and cpu[0].usd_per_hour is None and cpu[0].own_usd_per_hour is not None
    assert cpu[0].own_usd_per_hour > 0
    assert math.isfinite(cpu[0].point.ttft_p99) and cpu[0].point.ttft_p99 <= 0.02
    assert res.options[-1].hardware.endswith("EPYC-9654")      # no rental price: ranked last


def test_a_chip_without_a_price_ranks_by_the_gpus_it_takes():
    # B300 has no price in the catalog: the smallest deployment that carries the rate comes first,
    # not the largest replica (whose only merit is the lowest TTFT).
    assert catalog.gpus.get("B300").prices.rental_usd_per_gpu_hour is None
    b300 = from_flags("B300:8", 1, "NDR400", None).fabric
    res = search(load_model_spec("llama3-70b"), [b300], 20, Traffic(20, Lengths(512), Lengths(256)),
                 quant=Quant("fp8", "fp8"))
    assert res.best is not None and all(o.usd_per_hour is None for o in res.options)
    gpus = [o.gpus for o in res.options]
    assert gpus == sorted(gpus) and res.best.gpus == min(gpus) <= 4
