"""The `trace` workload kind: jobs replayed from a trace file (see sim/traces/)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.files import is_file
from gpucluster.errors import UserError
from gpucluster.sim.distributions import sample
from gpucluster.sim.traces import read
from gpucluster.sim.workload import Context, allowed_types, arrival_times, generators


@generators.register("trace")
def trace(ctx: Context, w: Any, loc: tuple) -> None:
    where = ctx.loaded.where(*loc)
    path = ctx.loaded.path(w.path)
    if not is_file(path):
        raise UserError(f"trace file not found: {path}", **ctx.loaded.where(*loc, "path"))
    opts: dict[str, Any] = {"limit": w.limit}
    fmt = w.format
    from gpucluster.sim.traces import load_all
    canonical = load_all().canonical(fmt, **ctx.loaded.where(*loc, "format"))
    if canonical == "gavel" and w.runtimes:
        opts["runtimes"] = str(ctx.loaded.path(w.runtimes))
    if canonical == "gavel" and w.throughputs:
        opts["throughputs"] = str(ctx.loaded.path(w.throughputs))
    got = read(canonical, str(path), **opts)
    ctx.trace_reports.append(got.report() | {"workload": w.name})
    if not got.jobs:
        raise UserError(f"no usable jobs in the trace ({got.summary()})", **ctx.loaded.where(*loc, "path"))
    jobs = got.jobs
    rng = ctx.rng(f"workload:{w.name}")
    submits = np.array([j.submit for j in jobs], dtype=float)
    if w.arrivals is not None:  # a trace without arrival times (philly runtimes): the scenario's process
        times = arrival_times(w.arrivals, ctx.horizon_s, rng, where)
        jobs = jobs[:len(times)]
        submits = times[:len(jobs)]
    gpus = [j.gpus for j in jobs]
    if w.gpus is not None:
        gpus = np.maximum(1, np.rint(sample(w.gpus, len(jobs), rng, ctx.loaded.base, where))).astype(int).tolist()
    default_types = allowed_types(ctx, w, where) if w.gpu_types else None
    s = w.time_scale
    submits = submits * w.arrival_scale
    kind_ckpt = w.checkpoint_minutes is not None
    known = set(ctx.cluster_types)
    from gpucluster.sim.throughputs import cluster_speeds
    speeds_of = cluster_speeds(jobs, ctx.cluster_types, ctx.notes, w.name)   # gavel: steps/s per type
    dropped = 0
    for j, t, g in zip(jobs, submits.tolist(), gpus, strict=True):
        types = default_types
        if types is None and j.gpu_types:
            types = [x for x in j.gpu_types if x in known] or None
            if types is None:
                types = list(j.gpu_types)   # the cluster lacks them: the job is reported as unrunnable
        if ctx.horizon_s is not None and t * s > ctx.horizon_s:
            dropped += 1
            continue
        ctx.new_job(cls=w.name, util=w.gpu_util, kind="training" if kind_ckpt or g > 1 else "batch", gpus=int(g), submit=t * s,
                    work=float("inf") if w.hold else j.duration * s, milli=j.milli, cpu_milli=j.cpu_milli, mem_mib=j.mem_mib,
                    types=frozenset(types) if types else None, speeds=speeds_of(j), queue=w.queue, priority=w.priority,
                    ckpt_interval=(w.checkpoint_minutes or 0.0) * 60.0, ckpt_write=w.checkpoint_write_s,
                    restart_s=w.restart_s,
                    # how the job ended in the history (sacct: failed, cancelled) and what it recorded
                    extra=j.record() if hasattr(j, "record") else {},
                    **(j.job_fields(s) if hasattr(j, "job_fields") else {}))   # sacct: limit, partition, QOS
    if dropped:
        ctx.notes.append(f"{w.name}: {dropped:,} trace jobs arrive after the horizon and were not replayed")
