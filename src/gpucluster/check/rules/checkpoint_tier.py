"""Checkpoint storage too slow for the job's MTBF: at Daly's optimal interval on the tier the
job checkpoints to (`--checkpoint-tier`, else the best durable option the spec offers), the
effective training time ratio (goodput, Daly's wall-clock model) and the work lost per failure.

Thresholds: warning when goodput falls below 95% or more than 2 h of work is lost per failure
(seed 1: "Your checkpointing strategy determines whether you lose 10 minutes or 2 hours of
training"); error below 80%. Llama 3 reports an effective training time above 90% at 16,384 GPUs.
A spec without storage, or with local NVMe only (lost with its node), is a warning.
"""

from __future__ import annotations

from gpucluster.check.findings import Finding, Severity
from gpucluster.check.rules.base import Rule, rule
from gpucluster.units import format_duration

WARN_GOODPUT, ERROR_GOODPUT, WARN_LOST_S = 0.95, 0.80, 2 * 3600


@rule
class CheckpointTier(Rule):
    id = "checkpoint-tier"
    summary = "checkpoint tier too slow for the MTBF (goodput, lost work per failure)"

    def check(self, ctx):
        plan = ctx.reliability
        if plan is None:
            yield Finding(self.id, "warning", "the spec has no storage tiers: checkpoints have nowhere to go",
                          "add the storage tiers (local NVMe, parallel file system) under `storage:`", {},
                          ctx.at("name"))
            return
        opt = plan.option(ctx.checkpoint_tier) if ctx.checkpoint_tier else plan.best
        o = opt.optimal
        best = plan.best
        ev = {"model": ctx.model_note, "checkpoint_tb": round(plan.size.total_bytes / 1e12, 3), "tier": opt.option.name,
              "write_s": round(opt.option.delta_s, 2), "write_limit": opt.option.limit,
              "async_copy_s": round(opt.option.copy_s, 2), "gpus": plan.gpus,
              "mtbf_s": round(plan.mtbf_s), "failure_profile": plan.failures.profile,
              "daly_interval_s": round(o.interval_s), "lost_work_per_failure_s": round(o.lost_work_per_failure_s),
              "goodput": round(o.goodput, 4)}
        if not opt.option.durable:
            yield Finding(self.id, "warning",
                          f"checkpoints go only to {opt.option.name} (local NVMe): a failed node takes its shard along",
                          "copy each checkpoint asynchronously to a shared tier (parallel file system or object store)",
                          ev, ctx.at("storage"))
            return
        sev: Severity | None = ("error" if o.goodput < ERROR_GOODPUT else
               "warning" if o.goodput < WARN_GOODPUT or o.lost_work_per_failure_s > WARN_LOST_S else None)
        if sev is None:
            return
        better = "" if best is opt else (f"; {best.option.name} would give {best.optimal.goodput:.1%} and "
                                         f"{format_duration(best.optimal.lost_work_per_failure_s)}")
        yield Finding(
            self.id, sev,
            f"checkpointing {ev['checkpoint_tb']} TB to {opt.option.name} takes {format_duration(opt.option.delta_s)}; "
            f"with a failure every {format_duration(plan.mtbf_s)} on {plan.gpus} GPUs the best interval "
            f"({format_duration(o.interval_s)}) leaves goodput {o.goodput:.1%} and loses "
            f"{format_duration(o.lost_work_per_failure_s)} per failure{better}",
            "write checkpoints to local NVMe and copy them asynchronously to the parallel file system, or buy "
            "write bandwidth: the blocking write must be small against the MTBF",
            ev, ctx.at("storage"))
