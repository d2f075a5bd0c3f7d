"""The model does not fit the job's GPUs on any layout the training planner tries (TP, PP, CP,
EP, ZeRO stages, recompute, optimizer offload), with the leanest layout's memory."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class ModelFit(Rule):
    id = "model-fit"
    summary = "the model does not fit the GPUs"

    def check(self, ctx):
        from gpucluster.errors import UserError

        plan = ctx.training
        if not isinstance(plan, UserError):
            return
        yield Finding(self.id, "error", f"{ctx.model_note} on {ctx.job_gpus} x {ctx.pool.gpu}: {plan.reason}",
                      "more GPUs (or GPUs with more HBM), a shorter sequence, or a smaller model",
                      {"model": ctx.model_note, "gpus": ctx.job_gpus, "gpu": ctx.pool.gpu,
                       "hbm_gib": ctx.pool.gpu_entry.memory.capacity_gib.value},
                      ctx.at("node_pools", ctx.pool_index(), "gpu"))
