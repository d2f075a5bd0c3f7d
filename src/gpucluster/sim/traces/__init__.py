"""Trace readers, one module per format, in one registry.

Every reader returns a `TraceRead`: the jobs, the rows read, and the bad rows
skipped, counted by reason with the first line of each (a corrupt row never
stops a replay). Rows that are fine but not simulated (CPU-only jobs, Slurm job
steps) are counted apart, as `skipped`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpucluster.registry import Registry

readers: Registry = Registry("trace format")


@dataclass
class TraceJob:
    submit: float                  # seconds from the trace's start
    duration: float                # seconds of run time as recorded
    gpus: int
    milli: int = 1000              # share of one GPU (GPU-sharing pods)
    cpu_milli: int = 0
    mem_mib: int = 0
    gpu_types: tuple[str, ...] | None = None
    name: str = ""
    steps: float = 0.0             # gavel: total steps
    job_type: str = ""
    speeds: dict[str, float] | None = None   # gavel: steps/s per throughput-table GPU type


@dataclass(kw_only=True)
class BadLines:
    """What a reader skipped: unreadable lines by reason with the first line number of each, and
    records read but not used, by reason. `unit` names a line in the report ("rows", "lines")."""

    bad: Counter = field(default_factory=Counter)
    first_bad: dict[str, int] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)

    def bad_row(self, line: int, reason: str) -> None:
        self.bad[reason] += 1
        self.first_bad.setdefault(reason, line)

    def bad_report(self, unit: str) -> dict:
        return {f"bad_{unit}": sum(self.bad.values()),
                "bad": {k: {unit: v, "first_line": self.first_bad[k]} for k, v in self.bad.most_common()},
                "skipped": dict(self.skipped.most_common())}

    def bad_summary(self, unit: str, skipped_label: str) -> list[str]:
        parts = []
        if self.bad:
            worst = ", ".join(f"{n} {why} (first at line {self.first_bad[why]})" for why, n in self.bad.most_common(3))
            parts.append(f"{sum(self.bad.values()):,} bad {unit} skipped: {worst}")
        if self.skipped:
            parts.append(f"{skipped_label}: " + ", ".join(f"{n:,} {why}" for why, n in self.skipped.most_common()))
        return parts


@dataclass
class TraceRead(BadLines):
    path: str
    format: str
    jobs: list[TraceJob] = field(default_factory=list)
    rows: int = 0

    def report(self) -> dict:
        return {"path": self.path, "format": self.format, "rows": self.rows, "jobs": len(self.jobs),
                **self.bad_report("rows")}

    def summary(self) -> str:
        return "; ".join([f"{self.path}: {len(self.jobs):,} jobs from {self.rows:,} rows",
                          *self.bad_summary("rows", "not simulated")])


def load_all() -> Registry:
    from gpucluster.sim.traces import gavel, openb, philly, sacct  # noqa: F401
    return readers


def read(fmt: str, path: str, **opts) -> TraceRead:
    return load_all().get(fmt, field="format")(path, **opts)
