"""Workload generators: turn a scenario's workloads into jobs (and inference services).

One generator per kind, in a registry. Each draws from its own random stream
(named after the workload), so adding a workload does not change the others'
jobs. Training durations come from the scenario (`duration_hours` on a reference
GPU type) or from the training planner (`model` + `tokens`), called once per
(model, GPU type, GPU count) and cached: never once per job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpucluster.errors import UserError
from gpucluster.registry import Registry
from gpucluster.sim.distributions import sample
from gpucluster.sim.jobs import INF, Job
from gpucluster.catalog.models import Precision
from gpucluster.specs.scenario import Arrivals, LoadedScenario
from gpucluster.specs.workload import filled

MAX_JOBS = 5_000_000
# Llama 2 and Llama 3 trained with about 4M tokens per optimizer step (as plan train's default).
BATCH_TOKENS = 4 * 2**20


@dataclass
class Context:
    loaded: LoadedScenario
    horizon_s: float | None
    cluster_types: list[str]               # GPU types in pool order (cloud type last)
    rng: Callable[[str], np.random.Generator]
    jobs: list[Job] = field(default_factory=list)
    services: list[Any] = field(default_factory=list)
    trace_reports: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _next_id: int = 0

    def new_job(self, **kw: Any) -> Job:
        job = Job(id=self._next_id, seq=self._next_id, **kw)
        self._next_id += 1
        self.jobs.append(job)
        if len(self.jobs) > MAX_JOBS:
            raise UserError(f"the workloads generate more than {MAX_JOBS:,} jobs; lower the arrival rates or "
                            f"the horizon", file=self.loaded.source)
        return job

    def next_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i


generators: Registry = Registry("workload kind")


def build_workload(ctx: Context) -> None:
    from gpucluster.sim import pipelines, services, trace_workload  # noqa: F401  (they register their kinds)
    for i, w in enumerate(ctx.loaded.spec.workloads):
        generators.get(w.kind)(ctx, w, ("workloads", i))
    ctx.jobs.sort(key=lambda j: (j.submit, j.seq))


def arrival_times(arr: Arrivals, horizon_s: float | None, rng: np.random.Generator, where: dict) -> np.ndarray:
    start = arr.start_hours * 3600.0
    end = min(arr.end_hours * 3600.0 if arr.end_hours else INF, horizon_s if horizon_s else INF)
    if arr.process == "once":
        return np.full(filled(arr.count), start) if start <= end else np.zeros(0)   # once: count is set
    if end == INF and arr.count is None:
        raise UserError("arrivals never stop: give count or end_hours here, or the scenario's horizon_days", **where)
    rate = filled(arr.per_day) / 86400.0          # poisson and fixed: per_day is set
    cap = arr.count if arr.count is not None else MAX_JOBS + 1
    if arr.process == "fixed":
        n = cap if end == INF else min(cap, math.floor((end - start) * rate + 1e-9) + 1)
        return start + np.arange(min(n, MAX_JOBS + 1)) / rate
    peak = rate * (1 + arr.diurnal_amplitude)
    out: list[np.ndarray] = []
    t, total = start, 0
    while total < cap and t < end:
        chunk = int(min(max(1024, (end - t) * peak * 1.2 if end < INF else 4096), 1_000_000))
        gaps = rng.exponential(1.0 / peak, chunk)
        times = t + np.cumsum(gaps)
        t = float(times[-1])
        if arr.diurnal_amplitude:
            hours = (times / 3600.0) % 24.0
            keep = rng.random(chunk) * (1 + arr.diurnal_amplitude) < 1 + arr.diurnal_amplitude * np.cos(
                2 * np.pi * (hours - arr.peak_hour) / 24.0)
            times = times[keep]
        times = times[times <= end]
        out.append(times[:cap - total])
        total += len(out[-1])
        if total > MAX_JOBS:
            raise UserError(f"arrivals generate more than {MAX_JOBS:,} jobs", **where)
    return np.concatenate(out) if out else np.zeros(0)


def allowed_types(ctx: Context, w: Any, where: dict) -> list[str]:
    types = [t for t in ctx.cluster_types if w.gpu_types is None or t in w.gpu_types]
    if not types:
        raise UserError(f"the cluster has none of the GPU types {', '.join(w.gpu_types)} "
                        f"(it has {', '.join(ctx.cluster_types)})", **where)
    return types


def peak_speeds(types: list[str], reference: str) -> dict[str, float] | None:
    """Relative speed per type from dense peak (an estimate; the planner is better): bf16 peak, or
    fp16 / fp32 when a catalog type lacks bf16 (V100, P100, T4; K80 has fp32 only), so that every
    catalog type is compared at one precision they all have."""
    if len(types) == 1 and types[0] == reference:
        return None
    from gpucluster.catalog import catalog

    known = [catalog.gpus.get(t).peak_tflops for t in {*types, reference} if t in catalog.gpus]
    prec: Precision = next((p for p in ("bf16", "fp16", "fp32") if all(p in pk for pk in known)), "fp32")

    def peak(t: str) -> float:
        if t not in catalog.gpus:
            return 1.0  # a type outside the catalog (a trace's): same speed
        return float(catalog.gpus.get(t).peak_tflops[prec].value)
    ref = peak(reference)
    return {t: peak(t) / ref for t in types}


@generators.register("training")
def training(ctx: Context, w: Any, loc: tuple) -> None:
    where = ctx.loaded.where(*loc)
    rng = ctx.rng(f"workload:{w.name}")
    times = arrival_times(w.arrivals, ctx.horizon_s, rng, where)
    n = len(times)
    gpus = np.maximum(1, np.rint(sample(w.gpus, n, rng, ctx.loaded.base, where))).astype(int)
    types = allowed_types(ctx, w, where)
    reference = w.reference_gpu or types[0]
    if w.model is not None:
        from gpucluster.sim.durations import planner_works
        works = planner_works(ctx, w, types, sorted(set(gpus.tolist())), where)
    else:
        hours = sample(w.duration_hours, n, rng, ctx.loaded.base, ctx.loaded.where(*loc, "duration_hours"))
        speeds = peak_speeds(types, reference)
        if w.job_type is not None:   # a throughput table's job type: speeds per (GPU type, GPU count)
            from gpucluster.sim.throughputs import table_speeds
            by_gpus = table_speeds(ctx.loaded, w, loc, types, reference, sorted(set(gpus.tolist())))
    for i in range(n):
        g = int(gpus[i])
        if w.model is not None:
            work, speeds = works[g]
        else:
            if w.job_type is not None:
                speeds = by_gpus[g]
            work = float(hours[i]) * 3600.0
        ctx.new_job(cls=w.name, util=w.gpu_util, kind="training", gpus=g, submit=float(times[i]), work=work,
                    types=frozenset(types) if w.gpu_types else None, speeds=speeds, queue=w.queue,
                    priority=w.priority, ckpt_interval=(w.checkpoint_minutes or 0.0) * 60.0,
                    ckpt_write=w.checkpoint_write_s, restart_s=w.restart_s, max_retries=w.max_retries)


@generators.register("batch")
def batch(ctx: Context, w: Any, loc: tuple) -> None:
    where = ctx.loaded.where(*loc)
    rng = ctx.rng(f"workload:{w.name}")
    times = arrival_times(w.arrivals, ctx.horizon_s, rng, where)
    raw = np.maximum(1, np.rint(sample(w.tasks, len(times), rng, ctx.loaded.base, where)))
    total = float(raw.sum())   # the cap before a job (or a task duration) is built: 1e8 tasks took 3.6 GB
    if not total + len(ctx.jobs) <= MAX_JOBS:
        raise UserError(f"{w.name}: {total:.3g} tasks in all, with the other workloads more than {MAX_JOBS:,} jobs; "
                        "lower tasks, the arrival rate or the horizon", **where)
    counts = raw.astype(int)
    hours = sample(w.task_hours, int(counts.sum()), rng, ctx.loaded.base, ctx.loaded.where(*loc, "task_hours"))
    types = allowed_types(ctx, w, where)
    speeds = peak_speeds(types, types[0])
    k = 0
    for t, c in zip(times.tolist(), counts.tolist(), strict=True):
        for _ in range(c):
            ctx.new_job(cls=w.name, util=w.gpu_util, kind="batch", gpus=w.gpus_per_task, submit=t, work=float(hours[k]) * 3600.0,
                        types=frozenset(types) if w.gpu_types else None, speeds=speeds, queue=w.queue,
                        priority=w.priority, max_retries=w.max_retries)
            k += 1
