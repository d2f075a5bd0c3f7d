"""Microsoft Philly run times (`philly_runtime.csv`: one column, seconds).

The file holds run times only: arrivals and GPU counts come from the scenario's
`arrivals` and `gpus` (default 1 GPU). Jobs are read in file order.
"""

from __future__ import annotations

import csv
import math

from gpucluster.errors import UserError
from gpucluster.sim.traces import TraceJob, TraceRead, readers


def read_runtimes(path: str, limit: int | None = None) -> tuple[list[float], TraceRead]:
    out = TraceRead(path, "philly")
    values: list[float] = []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or header[0].strip() != "runtime":
            raise UserError("not a Philly runtime CSV (expected a 'runtime' header)", file=path, line=1)
        for lineno, row in enumerate(reader, start=2):
            if not row:
                continue
            out.rows += 1
            try:
                v = float(row[0])
            except (ValueError, IndexError):
                out.bad_row(lineno, "not a number")
                continue
            if not math.isfinite(v) or v < 0:
                out.bad_row(lineno, "negative or infinite run time")
                continue
            values.append(v)
            if limit is not None and len(values) >= limit:
                break
    return values, out


@readers.register("philly", "philly-runtime")
def read_philly(path: str, limit: int | None = None) -> TraceRead:
    values, out = read_runtimes(path, limit)
    out.jobs = [TraceJob(0.0, v, 1, name=str(i)) for i, v in enumerate(values)]
    return out
