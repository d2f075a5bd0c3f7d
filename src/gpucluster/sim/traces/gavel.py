"""Philly-derived job traces as published with Gavel (stanford-futuredata/gavel,
`scheduler/traces/msr/`): tab-separated `job_type, command, num_steps_arg,
needs_data_dir, total_steps, arrival_time (s), scale_factor (GPUs)`.

Arrival times and GPU counts come from Philly; the job types and step counts are
Gavel's synthetic assignment, and Gavel's per-type throughputs are not shipped
here. So run times are taken from the Philly run-time distribution by rank:
within each job type, the job with the k-th smallest step count gets the run
time at the same quantile of `philly_runtime.csv` (longer jobs stay longer).
"""

from __future__ import annotations

import math

from collections import defaultdict
from pathlib import Path

import numpy as np

from gpucluster.errors import UserError
from gpucluster.sim.traces import TraceJob, TraceRead, readers


@readers.register("gavel", "philly-trace")
def read_gavel(path: str, limit: int | None = None, runtimes: str | None = None) -> TraceRead:
    out = TraceRead(path, "gavel")
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            out.rows += 1
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 7:
                out.bad_row(lineno, f"{len(parts)} tab-separated fields, expected 7")
                continue
            try:
                steps, arrival, gpus_f = float(parts[4]), float(parts[5]), float(parts[6])
                if not all(math.isfinite(v) for v in (steps, arrival, gpus_f)) or gpus_f > 2**31:
                    raise ValueError
                gpus = int(gpus_f)
            except ValueError:
                out.bad_row(lineno, "a number field is not a number")
                continue
            if steps <= 0 or arrival < 0 or gpus <= 0:
                out.bad_row(lineno, "steps, arrival or GPUs not positive")
                continue
            out.jobs.append(TraceJob(arrival, 0.0, gpus, name=str(lineno), steps=steps, job_type=parts[0]))
            if limit is not None and len(out.jobs) >= limit:
                break
    rt = Path(runtimes) if runtimes else Path(path).with_name("philly_runtime.csv")
    if not rt.is_file():
        raise UserError(f"gavel traces take run times from the Philly run-time CSV; not found: {rt} "
                        f"(set runtimes: in the workload)", file=path)
    from gpucluster.sim.traces.philly import read_runtimes
    values, _ = read_runtimes(str(rt))
    if not values:
        raise UserError("no usable run times", file=str(rt))
    sorted_rt = np.sort(np.asarray(values))
    by_type: dict[str, list[TraceJob]] = defaultdict(list)
    for j in out.jobs:
        by_type[j.job_type].append(j)
    for jobs in by_type.values():
        jobs.sort(key=lambda j: j.steps)
        n = len(jobs)
        for k, j in enumerate(jobs):
            q = (k + 0.5) / n
            j.duration = float(sorted_rt[min(len(sorted_rt) - 1, int(q * len(sorted_rt)))])
    return out
