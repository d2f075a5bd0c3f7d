"""A training job that never checkpoints, or whose time limit ends it before its next checkpoint.

A training job is a launch command (torchrun, deepspeed, accelerate, srun, mpirun or python)
that runs a Python program. It checkpoints when it passes an interval: Megatron-LM's
`--save-interval N` (iterations, timed at the planned step), `--checkpoint-interval` (a
duration), or Hugging Face / DeepSpeed style `--save_steps`/`--save-steps`. Megatron-LM's
`--exit-duration-in-mins M` saves once more before exiting, and counts when M minutes end
before the Slurm time limit.

- No interval: error when the planned run is longer than the job's time limit (nothing carries
  over to the next job), else a warning (a failure loses everything since the start).
- An interval the time limit cannot reach, with no save before the limit: error (every job of
  a chain starts again from the same checkpoint).
"""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.jobs import JobFile
from gpucluster.check.rules.base import Rule, rule
from gpucluster.units import format_duration

STEP_OPTIONS = ("save-interval", "save-steps", "save_steps")
TIME_OPTIONS = ("checkpoint-interval",)
TRAINING_LAUNCHERS = ("torchrun", "deepspeed", "accelerate", "srun", "mpirun")


def _training(job: JobFile):
    for c in job.commands:
        if c.launchers and any(w.endswith(".py") for w in c.argv[1:]):
            return c
    return None


def _limit_s(job: JobFile) -> tuple[float | None, int | None]:
    from gpucluster.generate.slurm import slurm_time_s

    s = job.directives.get("time")
    if s is None:
        return None, None
    try:
        return slurm_time_s(s.value), s.line
    except (ValueError, IndexError):
        return None, s.line


@rule
class TrainingCheckpoint(Rule):
    id = "training-checkpoint"
    summary = "training job that never checkpoints, or whose time limit ends before its next checkpoint"

    def check(self, ctx):
        from gpucluster.specs.durations import parse_duration

        for job in ctx.jobs:
            if job.kind not in ("sbatch", "shell"):
                continue
            cmd = _training(job)
            if cmd is None:
                continue
            limit_s, limit_line = _limit_s(job)
            interval_s, how, line = None, None, cmd.line
            s = cmd.option(*STEP_OPTIONS)
            if s is not None and s.value.isdigit():
                step = ctx.step_s()
                if step is not None:
                    interval_s, how, line = int(s.value) * step, f"every {s.value} iterations x {step:.2f} s", s.line
            s_time = cmd.option(*TIME_OPTIONS)
            if interval_s is None and s_time is not None:
                try:
                    interval_s, how, line = parse_duration(s_time.value, "s"), f"every {s_time.value}", s_time.line
                except ValueError:
                    pass
            if s is None and s_time is None:
                yield from self._never(ctx, job, cmd.line, limit_s)
                continue
            if interval_s is None or limit_s is None or interval_s < limit_s:
                continue
            ex = cmd.option("exit-duration-in-mins")
            if ex is not None and ex.value.isdigit() and int(ex.value) * 60 < limit_s:
                continue   # Megatron-LM saves before the limit
            yield Finding(
                self.id, "error",
                f"checkpoints {how} = {format_duration(interval_s)}, but the time limit ends the job after "
                f"{format_duration(limit_s)}: it never reaches a checkpoint, and each resubmission starts over",
                "a --save-interval shorter than the time limit, or Megatron-LM's --exit-duration-in-mins below it "
                "(gpucluster generate slurm writes both)",
                {"interval_s": round(interval_s), "time_limit_s": round(limit_s)}, job.at(line or limit_line))

    def _never(self, ctx, job: JobFile, line: int, limit_s: float | None):
        from gpucluster.errors import UserError

        plan = ctx.training
        run_s = None if isinstance(plan, UserError) else plan.time_to_train_s
        longer = run_s is not None and limit_s is not None and run_s > limit_s
        ev = {"time_limit_s": None if limit_s is None else round(limit_s),
              "time_to_train_s": None if run_s is None else round(run_s)}
        if longer and run_s is not None and limit_s is not None:
            title = (f"training job never checkpoints, and {ctx.model_note} takes {format_duration(run_s)} to train "
                     f"against a {format_duration(limit_s)} time limit: no job gets further than the first")
        else:
            title = "training job never checkpoints: a failure loses everything since it started"
        yield Finding(self.id, "error" if longer else "warning", title,
                      "save at the reliability model's interval (--save/--load/--save-interval; `gpucluster "
                      "generate slurm` writes them, with a chain of jobs that resumes)", ev, job.at(line))
