"""Least attained service, discretised (Tiresias 2D-LAS, Gu et al. NSDI'19).

Jobs sit in priority levels by the GPU-seconds they have received so far
(thresholds in GPU-hours, default 1 and 16): less service, higher level, FIFO
inside a level. Every `tick_s` (default 300 s) and after every change, waiting
jobs of a higher level may preempt running jobs of lower levels (most attained
first) that have run at least one tick; preempted jobs checkpoint on the way out,
as Tiresias does, and pay their restart time when they resume.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Preempt, Start, View


@policies.register("las", "tiresias", "least-attained-service")
class LeastAttainedService(Policy):
    name = "las"
    tick_s: float                     # always set (default 300 s): the preemption rounds
    summary = "least attained service (Tiresias 2D-LAS): levels by GPU-hours received, preemptive"
    options_doc: ClassVar[dict[str, str]] = {
        "thresholds_gpu_hours": "level boundaries (default [1, 16])",
        "tick_s": "seconds between preemption rounds (default 300)", "depth": "jobs examined per pass (default 200)"}

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        self.thresholds = [float(x) * 3600 for x in self.options.get("thresholds_gpu_hours", [1, 16])]
        self.tick_s = float(self.options.get("tick_s", 300))
        self.depth = int(self.options.get("depth", 200))

    def level(self, attained: float) -> int:
        return bisect.bisect_right(self.thresholds, attained)

    def key(self, job: Job) -> tuple:
        return (-job.priority, self.level(job.attained), job.submit, job.seq)

    def schedule(self, view: View) -> list[Decision]:
        scr = Scratch(view.state)
        out: list[Decision] = list(self.greedy(view, view.queue[:self.depth], blocking=False, scr=scr))
        if not view.full or len(out) >= len(view.queue):
            return out
        started = {d.job.id for d in out}
        now = view.now
        top = len(self.thresholds)
        waiting = [j for j in view.queue[:self.depth] if j.id not in started and self.level(j.attained) < top]
        if not waiting:
            return out
        victims = [(self._live_level(j, now), j) for j in view.running.values()
                   if now - j.run_start >= self.tick_s and j.kind != "pipeline"]
        victims.sort(key=lambda lv: (-lv[0], -lv[1].priority, -lv[1].attained, -lv[1].id))
        taken: set[int] = set()
        for job in waiting[:10]:  # preemption rounds per pass, so a long queue costs O(10 x running)
            lvl = self.level(job.attained)
            free = sum(scr.avail[view.mask(t)].sum() if view.mask(t) is not None else scr.avail.sum()
                       for t in view.types_for(job)[:1])
            chosen, trial, freed = [], None, 0.0
            for vl, v in victims:
                if vl <= lvl:
                    break   # sorted by level: no lower-priority job left
                if v.id in taken or v.priority > job.priority:
                    continue
                chosen.append(v)
                freed += v.gpu_share
                if free + freed < job.gpu_share:
                    continue    # not enough GPUs yet: do not try to place
                if trial is None:
                    trial = _clone(scr)
                    for c in chosen:
                        trial.give(c.placed_alloc, c.milli, c.cpu_milli, c.mem_mib)
                else:
                    trial.give(v.placed_alloc, v.milli, v.cpu_milli, v.mem_mib)
                g = self.place(view, trial, job)
                if g is not None:
                    trial.take(g, job.milli, job.cpu_milli, job.mem_mib)
                    out.extend(Preempt(c, save=True) for c in chosen)
                    out.append(Start(job, g))
                    taken.update(c.id for c in chosen)
                    scr = trial
                    break
        return out

    def _live_level(self, job: Job, now: float) -> int:
        return self.level(job.attained + job.gpus * (now - job.run_start))


def _clone(scr: Scratch) -> Scratch:
    c = Scratch(scr.state)
    c.avail = scr.avail.copy()
    c._gpu_free = scr.gpu_free.copy()
    c._cpu = scr.cpu_free.copy()
    c._mem = scr.mem_free.copy()
    return c
