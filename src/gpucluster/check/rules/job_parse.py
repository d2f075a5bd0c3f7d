"""Job files that could not be parsed: one finding per problem, at the line that failed."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class JobParse(Rule):
    id = "job-parse"
    summary = "job file that does not parse"

    def check(self, ctx):
        for job in ctx.jobs:
            for p in job.problems:
                yield Finding(self.id, "error", f"{job.kind} file: {p.reason}",
                              "fix the syntax; the rest of this file was checked as far as it could be read",
                              {"kind": job.kind}, job.at(p.line))
