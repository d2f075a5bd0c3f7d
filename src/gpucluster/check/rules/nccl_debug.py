"""NCCL_DEBUG left at INFO or TRACE: every rank logs its topology, rings and channels (INFO) or
every operation (TRACE, which also slows collectives) into the job log. Keep it for bring-up."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class NcclDebug(Rule):
    id = "nccl-debug"
    summary = "NCCL_DEBUG=INFO/TRACE in a production job"

    def check(self, ctx):
        for job, s in ctx.job_settings("NCCL_DEBUG"):
            level = s.value.strip().upper()
            if level in ("INFO", "TRACE"):
                yield Finding(self.id, "warning",
                              f"NCCL_DEBUG={s.value}: {ctx.job_gpus} ranks log NCCL {level.lower()} messages"
                              + (" for every operation, slowing collectives" if level == "TRACE" else ""),
                              "NCCL_DEBUG=WARN in production; INFO only to debug a bring-up",
                              {"value": s.value, "ranks": ctx.job_gpus}, job.at(s.line))
