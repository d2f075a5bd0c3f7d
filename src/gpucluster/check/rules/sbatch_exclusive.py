"""A multi-node Slurm training job without `--exclusive`: other jobs may land on its nodes and
share their GPUs, NICs and memory bandwidth, and one slow rank slows every collective."""

from __future__ import annotations

from gpucluster.check.context import nodes_problem, nodes_range
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
            if s is None:
                continue
            # --nodes=MIN-MAX: Slurm may give up to MAX nodes, so the job is multi-node when MAX > 1.
            span = nodes_range(s.value)
            if span is None:
                value = s.value.strip()[:40]
                yield Finding(self.id, "error", f"--nodes={value}: {nodes_problem(s.value)}; cannot tell whether "
                              "the job spans nodes", "--nodes=N or --nodes=MIN-MAX with 1 <= MIN <= MAX",
                              {"nodes": value}, job.at(s.line))
                continue
            low, high = span
            if high > 1 and "exclusive" not in job.directives:
                count = str(low) if low == high else f"{low}-{high}"
                yield Finding(self.id, "warning",
                              f"{count}-node job without --exclusive: other jobs can share its nodes and slow every "
                              "collective", "#SBATCH --exclusive",
                              {"nodes": low} if low == high else {"nodes_min": low, "nodes_max": high}, job.at(s.line))
