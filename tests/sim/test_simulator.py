"""Behaviour of the simulator on small hand-made scenarios."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import check_now, pool, scenario, watch

from gpucluster.errors import UserError
from gpucluster.sim.jobs import CANCELLED, COMPLETED
from gpucluster.sim.run import build, simulate


def jobs_of(result, cls=None):
    return sorted((j for j in result.jobs if cls is None or j.cls == cls), key=lambda j: j.submit)


def fixed(name, t_hours, gpus, hours, **kw):
    """One job at a given time."""
    return {"kind": "training", "name": name, "arrivals": {"process": "once", "count": 1, "start_hours": t_hours},
            "gpus": gpus, "duration_hours": hours, **kw}


def test_easy_backfill_lets_short_jobs_pass_without_delaying_the_head():
    # 32 GPUs. A: 24 GPUs for 10 h. B (head): 32 GPUs. C: 8 GPUs for 5 h (ends before A): backfills.
    # D: 8 GPUs for 20 h would delay B: must wait.
    w = [fixed("A", 0, 24, 10), fixed("B", 0.1, 32, 1), fixed("C", 0.2, 8, 5), fixed("D", 0.3, 8, 20)]
    r = {j.cls: j for j in simulate(scenario(w, policy="backfill")).jobs}
    assert r["C"].first_start == pytest.approx(0.2 * 3600)
    assert r["B"].first_start == pytest.approx(10 * 3600)
    assert r["D"].first_start == pytest.approx(11 * 3600)
    f = {j.cls: j for j in simulate(scenario(w, policy="fifo")).jobs}
    assert f["C"].first_start == pytest.approx(11 * 3600)   # FIFO: C waits behind B


def test_a_job_larger_than_the_cluster_is_reported_not_a_hang():
    r = simulate(scenario([fixed("huge", 0, 64, 1), fixed("ok", 0, 8, 1)]))
    huge = next(j for j in r.jobs if j.cls == "huge")
    assert huge.state == CANCELLED and "more than the cluster has" in huge.reason
    assert r.summary["jobs"]["not_run"] and not r.summary["partial"]
    assert next(j for j in r.jobs if j.cls == "ok").state == COMPLETED


def test_failure_kills_job_and_it_restarts_from_its_last_checkpoint():
    w = [fixed("train", 0, 32, 200, checkpoint_minutes=60, checkpoint_write_s=60, restart_s=600)]
    loaded = scenario(w, failures={"per_gpu_hour": 2e-3, "repair_hours": 1}, seed=4,
                      pools=[pool("a", "H100", 6)])
    res = simulate(loaded)
    job = res.jobs[0]
    assert job.state == COMPLETED and job.restarts > 0
    # each failure loses at most one checkpoint interval (+ a write) of the job's 32 GPUs
    assert job.lost_gpu_s <= job.restarts * 32 * (3600 + 60) + 1e-6
    assert job.restart_gpu_s == pytest.approx(job.restarts * 32 * 600)
    assert job.useful_gpu_s == pytest.approx(32 * 200 * 3600)
    assert res.summary["failures"]["count"] >= job.restarts
    assert res.summary["goodput"] < 1


def test_failure_rate_matches_the_reliability_model_on_average():
    w = [fixed("idle", 0, 1, 0.1)]
    res = simulate(scenario(w, horizon_days=400, failures={"repair_hours": 0.5}, pools=[pool("a", "H100", 64)]))
    f = res.summary["failures"]
    # 512 GPUs x 1.97e-5 per GPU-hour: ~0.0101 per hour, ~97 in 400 days
    expected = 400 * 24 / f["expected_cluster_mtbf_hours"]
    assert abs(f["count"] - expected) < 4 * math.sqrt(expected)
    assert 0 < f["hardware"] < f["count"]     # Llama 3: most causes hardware, software ones too


def test_no_jobs_is_a_clear_error():
    w = [{"kind": "training", "name": "late", "arrivals": {"per_day": 1, "start_hours": 100}, "gpus": 1,
          "duration_hours": 1}]
    with pytest.raises(UserError, match="no jobs"):
        build(scenario(w, horizon_days=1))


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(UserError, match=r"unknown policy 'lottery'.*valid: .*backfill.*fifo"):
        build(scenario([fixed("a", 0, 1, 1)], policy="lottery"))


def test_inference_autoscales_and_counts_slo_misses():
    svc = {"kind": "inference", "name": "chat", "min_replicas": 1, "max_replicas": 3, "replica_rps": 10,
           "target_utilization": 1.0, "rate": {"kind": "diurnal", "mean_rps": 20, "amplitude": 0.8},
           "autoscale_s": 300, "cold_start_s": 60}
    res = simulate(scenario([svc], horizon_days=2))
    s = res.summary["services"]["chat"]
    assert s["peak_replicas"] == 3
    assert 0 < s["slo_miss_ratio"] < 0.2        # peak 36 rps > 3 x 10
    roomy = simulate(scenario([{**svc, "max_replicas": 8}], horizon_days=2)).summary["services"]["chat"]
    assert roomy["slo_miss_ratio"] < s["slo_miss_ratio"] and roomy["peak_replicas"] == 4


def test_pipelines_share_a_storage_tier():
    from gpucluster.specs.cluster import StorageTier
    tier = {"kind": "nfs", "name": "nfs", "capacity_tb": 100, "read_gbps": 2, "write_gbps": 1, "latency_ms": 1}
    w = [{"kind": "pipeline", "name": "video", "arrivals": {"process": "once", "count": 2}, "gpus": 1,
          "data_tb": 3.6, "tier": "nfs", "gbps_per_gpu": 5}]
    loaded = scenario(w)
    assert loaded.cluster is not None
    loaded.cluster = loaded.cluster.model_copy(update={"storage": (StorageTier(**tier),)})
    res = simulate(loaded)
    # two jobs share 2 GB/s: 1 GB/s each, 3.6 TB -> 3600 s
    assert [j.end for j in res.jobs] == [pytest.approx(3600), pytest.approx(3600)]
    one = {**w[0], "arrivals": {"process": "once", "count": 1}}
    loaded1 = scenario([one])
    assert loaded1.cluster is not None
    loaded1.cluster = loaded1.cluster.model_copy(update={"storage": (StorageTier(**tier),)})
    assert simulate(loaded1).jobs[0].end == pytest.approx(1800)


def test_cloud_burst_starts_nodes_for_waiting_jobs_and_bills_them():
    w = [fixed("a", 0, 32, 10), fixed("b", 0.1, 16, 2)]
    loaded = scenario(w, cloud_burst={"gpu": "H100:8", "max_nodes": 2, "after_wait_minutes": 30,
                                      "provision_minutes": 10, "idle_release_minutes": 5, "usd_per_gpu_hour": 3})
    sim = build(loaded)
    watch(sim)
    sim.run()
    b = next(j for j in sim.by_id.values() if j.cls == "b")
    assert b.first_start == pytest.approx(0.1 * 3600 + 40 * 60)   # waited 30 min, then 10 min provisioning
    assert sim.burst.started == 2
    # billed from the request to 5 idle minutes after b ends: 16 GPUs x (10 + 120 + 5) min
    assert sim.burst.billed_gpu_s == pytest.approx(16 * (10 + 120 + 5) * 60)
    check_now(sim)


def test_kueue_borrows_then_reclaims():
    w = [fixed("borrower", 0, 32, 10, queue="research", checkpoint_minutes=30),
         fixed("owner", 1, 16, 1, queue="prod")]
    q = {"research": {"gpus": 16}, "prod": {"gpus": 16}}
    r = {j.cls: j for j in simulate(scenario(w, policy="kueue", queues=q)).jobs}
    assert r["borrower"].first_start == 0               # borrows prod's idle quota
    assert r["owner"].first_start == pytest.approx(3600)  # reclaims it at once
    assert r["borrower"].preemptions == 1 and r["borrower"].state == COMPLETED


def test_static_partitions_reject_jobs_larger_than_their_slice():
    w = [fixed("big", 0, 24, 1, queue="a"), fixed("small", 0, 8, 1, queue="b")]
    res = simulate(scenario(w, policy="partition", queues={"a": {"gpus": 16}, "b": {"gpus": 16}}))
    big = next(j for j in res.jobs if j.cls == "big")
    assert big.state == CANCELLED and "partition 'a'" in big.reason
    shared = simulate(scenario(w, policy="fifo", queues={"a": {"gpus": 16}, "b": {"gpus": 16}}))
    assert all(j.state == COMPLETED for j in shared.jobs)


def test_hetero_routes_to_the_best_throughput_per_dollar():
    pools = [pool("h100", "H100", 1), pool("a100", "A100-SXM4-80GB", 1)]
    w = [fixed("j", 0, 8, 1)]
    agn = simulate(scenario(w, policy="backfill", pools=pools)).jobs[0]
    het = simulate(scenario(w, policy="hetero", pools=pools)).jobs[0]
    assert agn.gpu_type == "H100-SXM5-80GB"        # pool order
    # bf16 peak per catalog rental dollar decides; whichever it is, hetero's choice is at least as good
    from gpucluster.sim.run import type_prices
    prices = type_prices(scenario(w, pools=pools))
    value = {t: het.speed_on(t) / prices[t] for t in prices}
    assert value[het.placed_type] == max(value.values())


def test_topology_aware_gangs_use_fewer_leaves():
    # 8 nodes, 2 per leaf; three 1-node jobs fill nodes 0-2, so leaf 1 has one node free
    w = [fixed("fill", 0, 8, 100), fixed("fill2", 0, 8, 100), fixed("fill3", 0, 8, 100),
         fixed("gang", 0.1, 16, 1)]
    loaded: dict[str, Any] = {"pools": [pool("a", "H100", 8)], "npl": 2}
    pack = next(j for j in simulate(scenario(w, policy="backfill", **loaded)).jobs if j.cls == "gang")
    topo = next(j for j in simulate(scenario(w, policy="topo", **loaded)).jobs if j.cls == "gang")
    assert pack.leaves == 2 and topo.leaves == 1       # pack takes nodes 3 and 4; topo a whole leaf


def test_planner_durations_are_cached(monkeypatch):
    from gpucluster.sim import durations
    durations.step_seconds.cache_clear()
    w = [{"kind": "training", "name": "llm", "arrivals": {"per_day": 50, "count": 40}, "gpus": [8, 16],
          "model": "llama2-7b", "tokens": "1B"}]
    res = simulate(scenario(w, pools=[pool("a", "H100", 4)]))
    info = durations.step_seconds.cache_info()
    assert info.misses == 2                          # one planner search per GPU count, not per job
    j8 = next(j for j in res.jobs if j.gpus == 8)
    j16 = next(j for j in res.jobs if j.gpus == 16)
    assert j8.work > j16.work > 0
    assert any("planner" in n for n in res.summary["notes"])
