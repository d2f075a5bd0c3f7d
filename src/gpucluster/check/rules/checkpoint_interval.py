"""A checkpoint interval far from Daly's optimum for this job (more than 2x off either way).

The interval comes from `--checkpoint-interval` or a job file: `--checkpoint-interval 30m`
(a bare number is seconds) or Megatron's `--save-interval N` (iterations x the planned step
time). Evidence: goodput and lost work per failure at that interval and at the optimum.
Warning; error when it costs 5 points of goodput or more.
"""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule
from gpucluster.units import format_duration

FAR = 2.0


@rule
class CheckpointInterval(Rule):
    id = "checkpoint-interval"
    summary = "checkpoint interval far from the optimum for the MTBF"

    def check(self, ctx):
        from gpucluster.model.reliability import plan_interval
        from gpucluster.specs.durations import parse_duration

        plan = ctx.reliability
        if plan is None:
            return
        given, where, how = ctx.checkpoint_interval_s, None, "--checkpoint-interval"
        if given is None:
            for job, s in ctx.job_settings("checkpoint-interval", "save-interval"):
                is_steps = any(c.option("save-interval") is s for c in job.commands)
                try:
                    if is_steps:
                        step = ctx.step_s()
                        if step is None:
                            continue
                        given, how = int(s.value) * step, f"--save-interval {s.value} x {step:.2f} s per step"
                    else:
                        given, how = parse_duration(s.value, "s"), f"--checkpoint-interval {s.value}"
                except ValueError:
                    yield Finding(self.id, "error", f"not a checkpoint interval: {s.value!r}",
                                  "an interval such as 30m, 1800 (seconds), or --save-interval N (iterations)",
                                  {"value": s.value}, job.at(s.line))
                    return
                where = job.at(s.line)
                break
        if given is None:
            return
        opt = plan.option(ctx.checkpoint_tier) if ctx.checkpoint_tier else plan.best
        best = opt.optimal
        mine = plan_interval(opt.option.delta_s, plan.mtbf_s, best.restart_s, interval_s=given,
                             extra_loss_s=opt.option.copy_s)
        ratio = given / best.interval_s
        if 1 / FAR <= ratio <= FAR:
            return
        loss = best.goodput - mine.goodput
        yield Finding(
            self.id, "error" if loss >= 0.05 else "warning",
            f"checkpoints every {format_duration(given)} ({how}); the optimum for a failure every "
            f"{format_duration(plan.mtbf_s)} and a {format_duration(opt.option.delta_s)} write to {opt.option.name} is "
            f"{format_duration(best.interval_s)} ({ratio:.2f}x): goodput {mine.goodput:.2%} against {best.goodput:.2%}",
            f"checkpoint every {format_duration(best.interval_s)} (Daly 2006, eq. 37)",
            {"interval_s": round(given), "optimal_interval_s": round(best.interval_s), "ratio": round(ratio, 3),
             "goodput": round(mine.goodput, 5), "optimal_goodput": round(best.goodput, 5),
             "lost_work_per_failure_s": round(mine.lost_work_per_failure_s),
             "optimal_lost_work_per_failure_s": round(best.lost_work_per_failure_s),
             "write_s": round(opt.option.delta_s, 2), "mtbf_s": round(plan.mtbf_s), "tier": opt.option.name},
            where)
