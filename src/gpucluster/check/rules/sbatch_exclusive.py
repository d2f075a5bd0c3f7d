"""A multi-node Slurm training job without `--exclusive`: other jobs may land on its nodes and
share their GPUs, NICs and memory bandwidth, and one slow rank slows every collective."""

from __future__ import annotations

from gpucluster.check.context import as_int
from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class SbatchExclusive(Rule):
    id = "sbatch-exclusive"
    summary = "multi-node sbatch job without --exclusive"

    def check(self, ctx):
        for job in ctx.jobs:
            if job.kind != "sbatch":
                continue
            s = job.directives.get("nodes")
            nodes = as_int(s)
            if nodes and nodes > 1 and "exclusive" not in job.directives:
                yield Finding(self.id, "warning",
                              f"{nodes}-node job without --exclusive: other jobs can share its nodes and slow every "
                              "collective", "#SBATCH --exclusive", {"nodes": nodes}, job.at(s.line))
