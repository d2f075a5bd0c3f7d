"""The run's summary as one JSON-ready dict (schema gpucluster-simulation/v1)."""

from __future__ import annotations

from typing import Any

from gpucluster.sim.jobs import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING
from gpucluster.sim.metrics import gpu_time, job_classes
from gpucluster.specs.cluster import ClusterSpec
from gpucluster.specs.scenario import LoadedScenario

H = 3600.0


def _price(cluster: ClusterSpec, pool: Any) -> tuple[float | None, str]:
    own = cluster.pool_prices(pool.name).usd_per_gpu_hour
    if own is not None:
        return own, "cluster spec prices.usd_per_gpu_hour"
    p = pool.gpu_entry.prices.rental_usd_per_gpu_hour
    if p is None:
        return None, "no price"
    src = pool.gpu_entry.sources.get(p.source)
    return p.value, f"catalog rental price of {pool.gpu} ({src.title if src else p.source})"


def _cost(sim: Any, loaded: LoadedScenario, hours: float, useful_h: float, work_h: float) -> dict[str, Any]:
    out: dict[str, Any] = {"on_prem_usd": None, "cloud_usd": 0.0, "sources": []}
    if loaded.cluster is not None:
        total: float | None = 0.0
        for p in loaded.cluster.node_pools:
            price, src = _price(loaded.cluster, p)
            if price is None or total is None:
                total = None
                break
            total += price * p.total_gpus * hours
            out["sources"].append(f"{p.name}: ${price:.2f}/GPU-h, {src}")
        out["on_prem_usd"] = total
    b = sim.burst
    if b is not None:
        from gpucluster.catalog import catalog
        price = b.spec.usd_per_gpu_hour     # the scenario's cloud_burst section
        src = "scenario cloud_burst.usd_per_gpu_hour"
        if price is None:
            rp = catalog.gpus.get(b.spec.gpu).prices.rental_usd_per_gpu_hour
            price, src = (rp.value, f"catalog rental price of {b.spec.gpu}") if rp else (0.0, "no price")
        out["cloud_usd"] = price * b.billed_gpu_s / H
        out["cloud_gpu_hours"] = b.billed_gpu_s / H
        out["cloud_nodes_started"] = b.started
        out["spot_reclaims"] = b.reclaims
        out["sources"].append(f"cloud: ${price:.2f}/GPU-h, {src}")
    if out["on_prem_usd"] is not None:
        out["total_usd"] = out["on_prem_usd"] + out["cloud_usd"]
        out["usd_per_useful_gpu_hour"] = out["total_usd"] / useful_h if useful_h > 0 else None
        out["usd_per_work_gpu_hour"] = out["total_usd"] / work_h if work_h > 0 else None
    return out


def summarize(sim: Any, loaded: LoadedScenario, wall_s: float) -> dict[str, Any]:
    st = sim.state
    end = sim.end_time
    if getattr(sim, "autoscaler", None) is not None:
        sim.autoscaler.finish(end)
    if sim.burst is not None:
        sim.burst.finish(end)
    jobs = list(sim.by_id.values())
    gt = gpu_time(jobs)
    svc_busy = sum(s.busy_gpu_s for s in sim.services)
    cap = st.capacity_gpu_s
    alloc = st.alloc_gpu_s
    states = {k: sum(j.state == k for j in jobs) for k in (COMPLETED, FAILED, CANCELLED, RUNNING, PENDING)}
    reasons: dict[str, int] = {}
    for j in jobs:
        if j.state in (FAILED, CANCELLED) and j.kind != "replica":
            reasons[j.reason] = reasons.get(j.reason, 0) + 1
    done = [j for j in jobs if j.state == COMPLETED and j.kind != "replica"]
    first = min((j.submit for j in jobs), default=0.0)
    out: dict[str, Any] = {
        "schema": "gpucluster-simulation/v1",
        "scenario": loaded.spec.name, "policy": sim.policy.name, "seed": sim.kernel.seed,
        "partial": sim.partial, "simulated_days": end / 86400.0,
        "wall_s": wall_s, "events": sim.kernel.events,
        "events_per_s": sim.kernel.events / wall_s if wall_s > 0 else None,
        "cluster": {"gpus": int(st.node_gpus[~st.node_cloud].sum()), "nodes": int((~st.node_cloud).sum()),
                    "types": {t: int(st.node_gpus[(st.node_type == i) & ~st.node_cloud].sum())
                              for i, t in enumerate(st.types) if ((st.node_type == i) & ~st.node_cloud).any()},
                    "cloud_gpus_max": int(st.node_gpus[st.node_cloud].sum())},
        "jobs": {"total": len(jobs), **states, "not_run": reasons},
        "utilization": {
            "allocation": alloc / cap if cap else None,
            "busy": (gt["busy"] + svc_busy) / cap if cap else None,
            "on_prem_allocation": ((alloc - st.cloud_alloc_gpu_s) / (cap - st.cloud_capacity_gpu_s)
                                   if cap > st.cloud_capacity_gpu_s else None),
            "final_allocation": st.alloc_milli / 1000 / st.capacity if st.capacity else None,
            "capacity_gpu_hours": cap / H, "allocated_gpu_hours": alloc / H,
            "cloud_capacity_gpu_hours": st.cloud_capacity_gpu_s / H, "cloud_allocated_gpu_hours":
                st.cloud_alloc_gpu_s / H,
            "idle_gpu_hours": st.idle_gpu_s / H, "down_gpu_hours": st.down_gpu_s / H},
        "gpu_hours": {k: v / H for k, v in gt.items() if k not in ("busy", "work")},
        "work_reference_gpu_hours": gt["work"] / H,
        "goodput": gt["useful"] / alloc if alloc else None,
        "makespan_s": (max(j.end for j in done) - first) if done else None,
        "classes": job_classes(jobs, end),
    }
    from gpucluster.sim.calibration import wait_comparison
    cal = wait_comparison(jobs)   # a replayed Slurm history: simulated against recorded waits
    if cal is not None:
        out["recorded_waits"] = cal
    f = sim.failures
    if f is not None:
        n = len(f.records)
        by: dict[str, int] = {}
        for r in f.records:
            by[r.component] = by.get(r.component, 0) + 1
        out["failures"] = {"count": n, "hardware": sum(r.hardware for r in f.records),
                           "by_component": dict(sorted(by.items(), key=lambda kv: -kv[1])),
                           "per_gpu_hour": f.per_gpu_hour, "source": f.source,
                           "repair_hours_default": f.rates.repair_hours, "repair_source": f.rates.repair_source,
                           "distribution": f.spec.distribution,
                           "cluster_mtbf_hours": (end / H / n) if n else None,
                           "expected_cluster_mtbf_hours": 1 / f.expected_rate_per_hour(),
                           "jobs_interrupted": sum(r.jobs_killed for r in f.records),
                           "lost_gpu_hours": (gt["lost_failures"] + gt["restart"]) / H,
                           "checkpoint_gpu_hours": gt["checkpoint"] / H}
    if sim.services:
        out["services"] = {s.spec.name: {
            "requests": s.demand, "served": s.served,
            "slo_miss_ratio": 1 - s.served / s.demand if s.demand else 0.0,
            "under_provisioned_ratio": s.miss_s / max(1e-9, (min(end, s.end_s or end) - s.start_s)),
            "peak_replicas": s.peak_replicas, "ready_gpu_hours": s.ready_gpu_s / H,
            "mean_load": s.busy_gpu_s / s.ready_gpu_s if s.ready_gpu_s else None} for s in sim.services}
    out["fragmentation"] = _frag(sim)
    out["cost"] = _cost(sim, loaded, end / H, gt["useful"] / H, gt["work"] / H)
    out["timeseries"] = sim.recorder.series(end, min(loaded.spec.samples, 500)) if sim.recorder else {}
    out["traces"] = sim.trace_reports
    out["notes"] = sim.notes
    out["warnings"] = getattr(sim, "warnings", [])
    return out


def _frag(sim: Any) -> dict[str, Any]:
    r = sim.recorder
    if r is None or not r.frag:
        return {"mean_gpus": None}
    cap = sim.state.capacity or 1
    waiting = [f for f, w in zip(r.frag, r.frag_waiting, strict=True) if w]
    return {"mean_gpus": sum(r.frag) / len(r.frag), "mean_ratio": sum(r.frag) / len(r.frag) / cap,
            "mean_ratio_while_waiting": (sum(waiting) / len(waiting) / cap) if waiting else None,
            "samples": len(r.frag)}
