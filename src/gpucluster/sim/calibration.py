"""Simulated against recorded waits, per partition: how an operator calibrates the twin.

A job replayed from a Slurm history (sacct) carries the wait the real cluster recorded
(Start - Eligible) and arrives in the simulation at its eligible time, so its simulated
wait (first start - arrival) measures the same thing. For each partition, over the jobs
that started in both, this reports the median and p90 of each, their difference
(simulated - recorded), and the median and mean of the per-job absolute differences (the
mean tells more when most jobs did not wait); jobs the
simulation never started are counted apart (their simulated wait is unknown, at least
the rest of the run). Quantiles are numpy's linear interpolation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.sim.jobs import Job

NO_PARTITION = "(none)"


def _q(a: np.ndarray, q: float) -> float | None:
    return float(np.percentile(a, q)) if len(a) else None


def _group(jobs: list[Job]) -> dict[str, Any]:
    started = [j for j in jobs if j.first_start is not None]
    # A job with no recorded wait is NaN (what numpy makes of None in a float array).
    rec = np.array([np.nan if j.recorded_wait_s is None else j.recorded_wait_s for j in started], dtype=float)
    sim = np.array([j.first_start - j.submit for j in started if j.first_start is not None], dtype=float)
    out: dict[str, Any] = {"jobs": len(jobs), "compared": len(started), "not_started": len(jobs) - len(started)}
    for name, a in (("recorded_s", rec), ("simulated_s", sim)):
        out[name] = {"p50": _q(a, 50), "p90": _q(a, 90), "mean": float(a.mean()) if len(a) else None}
    r, s = out["recorded_s"], out["simulated_s"]
    out["p50_error_s"] = None if r["p50"] is None else s["p50"] - r["p50"]
    out["p90_error_s"] = None if r["p90"] is None else s["p90"] - r["p90"]
    err = np.abs(sim - rec)
    out["median_abs_error_s"] = _q(err, 50)
    out["mean_abs_error_s"] = float(err.mean()) if len(err) else None
    return out


def wait_comparison(jobs: list[Job]) -> dict[str, Any] | None:
    """Per partition and overall; None when no job carries a recorded wait."""
    recorded = [j for j in jobs if j.recorded_wait_s is not None]
    if not recorded:
        return None
    by: dict[str, list[Job]] = {}
    for j in recorded:
        by.setdefault(j.partition or NO_PARTITION, []).append(j)
    return {"partitions": {p: _group(js) for p, js in sorted(by.items())}, "all": _group(recorded),
            "definition": "recorded: Start - Eligible from sacct; simulated: first start - arrival (Eligible); "
                          "over jobs started in both"}


def comparison_rows(s: dict[str, Any], fmt) -> list[list[str]]:
    """Display rows (partition, jobs compared, not started, recorded p50, simulated p50, recorded p90,
    simulated p90, mean |error|) of a summary's comparison; [] when it has none."""
    cal = s.get("recorded_waits")
    if not cal:
        return []
    groups = list(cal["partitions"].items())
    if len(groups) > 1:
        groups.append(("all", cal["all"]))
    return [[p, f"{g['compared']:,}", f"{g['not_started']:,}", fmt(g["recorded_s"]["p50"]),
             fmt(g["simulated_s"]["p50"]), fmt(g["recorded_s"]["p90"]), fmt(g["simulated_s"]["p90"]),
             fmt(g["mean_abs_error_s"])] for p, g in groups]


COLUMNS = ["partition", "jobs", "not started", "recorded p50", "simulated p50", "recorded p90", "simulated p90",
           "mean |sim - rec|"]
