"""Philly-derived job traces as published with Gavel (stanford-futuredata/gavel,
`scheduler/traces/msr/`): tab-separated `job_type, command, num_steps_arg,
needs_data_dir, total_steps, arrival_time (s), scale_factor (GPUs)`.

Arrival times and GPU counts come from Philly; the job types and step counts are
Gavel's synthetic assignment. As in Gavel's simulator, a job's run time on a GPU
type is `total_steps / throughput(job type, GPU type)` from a throughput table
(sim/throughputs.py): each job carries its steps/s per table GPU type (`speeds`)
and its duration on its fastest type. The table is the `throughputs` option, else
Gavel's 2019 table found beside the trace (../gavel/oracle_throughputs_2019.json,
the shared data's layout). A job type the table lacks is a bad row.

Without a table, and only when asked (`runtimes`, the Philly run-time CSV), run
times are taken from the Philly distribution by rank (the k-th smallest step count
of a job type gets the run time at that quantile): an approximation kept for
clusters of GPUs the table does not cover.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from gpucluster.files import is_file
from gpucluster.errors import UserError
from gpucluster.sim.traces import TraceJob, TraceRead, readers


@readers.register("gavel", "philly-trace")
def read_gavel(path: str, limit: int | None = None, runtimes: str | None = None,
               throughputs: str | None = None) -> TraceRead:
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
    if runtimes and not throughputs:
        _by_rank(out, runtimes)
        return out
    from gpucluster.sim.throughputs import default_table, read_table
    table_path = Path(throughputs) if throughputs else default_table(path)
    if table_path is None:
        rt = Path(path).with_name("philly_runtime.csv")
        if is_file(rt):   # the approximation, named in the report's format
            _by_rank(out, str(rt))
            return out
        raise UserError("gavel traces need a throughput table (run time = total_steps / throughput): set "
                        "throughputs: to Gavel's oracle_throughputs_2019.json", file=path)
    table = read_table(table_path)
    out.format = f"gavel (throughputs: {table_path.name})"
    kept = []
    speeds_cache: dict[tuple[str, int], dict[str, float]] = {}
    for j in out.jobs:
        key = (j.job_type, j.gpus)
        sp = speeds_cache.get(key)
        if sp is None:
            sp = speeds_cache[key] = {g: v for g, v in table.speeds(j.job_type, j.gpus).items() if v > 0}
        if not sp:
            out.bad_row(int(j.name), "job type not in the throughput table")
            continue
        j.speeds = sp
        j.duration = j.steps / max(sp.values())
        kept.append(j)
    out.jobs = kept
    return out


def _by_rank(out: TraceRead, runtimes: str) -> None:
    """Run times from the Philly distribution by step-count rank within each job type."""
    out.format = "gavel (run times by rank from the Philly distribution)"
    rt = Path(runtimes)
    if not is_file(rt):
        raise UserError(f"Philly run-time CSV not found: {rt}", file=out.path, field="runtimes")
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
