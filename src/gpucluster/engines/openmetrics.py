"""OpenMetrics / Prometheus text exposition (node-exporter textfile collector format), metric names
in base units (`_bytes`, `_seconds`, `_bytes_per_second`, ratios 0..1, counters `_total`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from gpucluster.errors import UserError
from gpucluster.output_file import write_output

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass
class Family:
    name: str
    kind: str              # gauge, counter
    help: str
    unit: str = ""
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels) -> Family:
        for k in labels:
            if not _LABEL.match(k):
                raise ValueError(f"bad label name {k!r}")
        x = float(value)
        if not math.isfinite(x):   # a finite figure scaled to base units can overflow (1e306 hours -> +Inf)
            raise UserError(f"{self.name}: the sample is {_value(x)} in base units ({self.unit or 'a ratio'}): "
                            "no finite value to export", field="metrics")
        self.samples.append(({k: str(v) for k, v in labels.items()}, x))
        return self


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x)) if abs(x) < 1e15 else repr(float(x))


def render(families: list[Family], openmetrics: bool = False) -> str:
    """Text format; with openmetrics=True the OpenMetrics flavour (`# UNIT`, `# EOF`)."""
    out = []
    for f in families:
        if not _NAME.match(f.name):
            raise ValueError(f"bad metric name {f.name!r}")
        if f.kind == "counter" and not f.name.endswith("_total"):
            raise ValueError(f"counter {f.name!r} must end in _total")
        # OpenMetrics names the family without _total; the Prometheus text format with it.
        family = f.name[: -len("_total")] if openmetrics and f.kind == "counter" else f.name
        out.append(f"# HELP {family} {_escape(f.help)}")
        out.append(f"# TYPE {family} {f.kind}")
        if openmetrics and f.unit:
            out.append(f"# UNIT {family} {f.unit}")
        sample_name = f.name
        for labels, value in f.samples:
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            out.append(f"{sample_name}{{{lab}}} {_value(value)}" if lab else f"{sample_name} {_value(value)}")
    if openmetrics:
        out.append("# EOF")
    return "\n".join(out) + "\n"


def write_textfile(path: str, families: list[Family], openmetrics: bool = False, field: str = "--metrics") -> None:
    """Atomically, as node-exporter's textfile collector wants: a temporary file in the same folder,
    flushed to disk, mode 0644 (mkstemp makes it 0600, which a collector running as another user
    could not read), then renamed over the target. A failure leaves no temporary file behind."""
    write_output(path, render(families, openmetrics=openmetrics), field=field, mode=0o644)


def collective_families(result: dict) -> list[Family]:
    """A `bench collective` result as gauges per op, size and placement (in-place, out-of-place)."""
    common = {"op": result["op"], "backend": result.get("backend", ""), "ranks": str(result["world_size"]),
              "nodes": str(result.get("nodes", 1))}
    busbw = Family("gpucluster_collective_busbw_bytes_per_second", "gauge",
                   "Collective bus bandwidth (nccl-tests busbw), bytes per second", "bytes_per_second")
    algbw = Family("gpucluster_collective_algbw_bytes_per_second", "gauge",
                   "Collective algorithm bandwidth (size / time), bytes per second", "bytes_per_second")
    time_s = Family("gpucluster_collective_time_seconds", "gauge", "Time of one collective", "seconds")
    wrong = Family("gpucluster_collective_wrong_values", "gauge", "Values that differed from the expected result")
    for r in result["rows"]:
        # one sample per measurement, labelled with how it was measured (bench/collective.py)
        measured = [(r.get("placement") or "out-of-place", r)]
        if r.get("in_place"):
            measured.append(("in-place", r["in_place"]))
        for placement, fig in measured:
            lab = {**common, "size_bytes": str(r["size_bytes"]), "placement": placement}
            busbw.add(fig["busbw_gbps"] * 1e9, **lab)
            algbw.add(fig["algbw_gbps"] * 1e9, **lab)
            time_s.add(fig["time_us"] * 1e-6, **lab)
            wrong.add(fig.get("wrong", 0), **lab)       # optional in the schema: 0 when not recorded
    return [busbw, algbw, time_s, wrong]


def simulation_families(summary: dict) -> list[Family]:
    """A `simulate run --json` summary: utilisation ratios, GPU-hours by use, jobs by state, per-class
    waits and completion times, cost. Gauges: the run's end state, not live counters."""
    base = {"scenario": summary.get("scenario", ""), "policy": summary.get("policy", "")}
    util = Family("gpucluster_sim_utilization_ratio", "gauge", "Allocated or busy GPU time / GPU capacity (0..1)")
    for k in ("allocation", "busy"):
        if k in summary.get("utilization", {}):
            util.add(summary["utilization"][k], **base, kind=k)
    hours = Family("gpucluster_sim_gpu_seconds", "gauge", "GPU time by use, seconds", "seconds")
    for k, v in summary.get("gpu_hours", {}).items():
        hours.add(float(v) * 3600, **base, use=k)
    jobs = Family("gpucluster_sim_jobs", "gauge", "Jobs by final state")
    for k, v in summary.get("jobs", {}).items():
        if isinstance(v, (int, float)) and k != "total":
            jobs.add(v, **base, state=k)
    goodput = Family("gpucluster_sim_goodput_ratio", "gauge", "Useful GPU time / allocated GPU time (0..1)")
    if summary.get("goodput") is not None:
        goodput.add(summary["goodput"], **base)
    wait = Family("gpucluster_sim_wait_seconds", "gauge", "Queueing wait by workload class", "seconds")
    jct = Family("gpucluster_sim_completion_seconds", "gauge", "Job completion time by workload class", "seconds")
    for name, c in (summary.get("classes") or {}).items():
        for fam, key in ((wait, "wait_s"), (jct, "jct_s")):
            for q, v in (c.get(key) or {}).items():
                if v is not None:
                    fam.add(v, **base, workload=name, stat=q)
    cost = Family("gpucluster_sim_cost_usd", "gauge", "Cost of the simulated period, US dollars")
    for k in ("on_prem_usd", "cloud_usd"):
        if (summary.get("cost") or {}).get(k) is not None:
            cost.add(summary["cost"][k], **base, where=k.removesuffix("_usd"))
    return [f for f in (util, hours, jobs, goodput, wait, jct, cost) if f.samples]
