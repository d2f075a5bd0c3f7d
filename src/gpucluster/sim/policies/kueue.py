"""Priority queues with quotas, borrowing and preemption, as Kueue does.

Each queue (a ClusterQueue) has a nominal quota of GPUs; all queues form one
cohort. Jobs are admitted in priority then arrival order, skipping those that do
not fit (BestEffortFIFO). A job within its queue's nominal quota is admitted if it
fits; beyond it, it borrows the cohort's unused quota up to the queue's
borrowing_limit. When a job within its nominal quota does not fit, Kueue reclaims:
it preempts workloads of queues that are borrowing (lowest priority, most recently
started first), then lower-priority workloads of its own queue
(withinClusterQueue: LowerPriority). Preempted jobs restart from their last
checkpoint. Quotas count GPUs of any type (one resource flavor).
"""

from __future__ import annotations

from typing import ClassVar

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Preempt, Reject, Start, View
from gpucluster.sim.policies.las import _clone

INF = float("inf")


@policies.register("kueue", "quota", "quotas")
class KueueLike(Policy):
    name = "kueue"
    summary = "Kueue-like queues: nominal quotas, borrowing from the cohort, preemption to reclaim"
    options_doc: ClassVar[dict[str, str]] = {"depth": "jobs examined per pass (default 500)"}

    def _nominal(self, q: str) -> float:
        spec = self.queues.get(q)
        return float(spec.gpus) if spec is not None else 0.0

    def _limit(self, q: str) -> float:
        spec = self.queues.get(q)
        return INF if spec is None or spec.borrowing_limit is None else float(spec.borrowing_limit)

    def schedule(self, view: View) -> list[Decision]:
        usage = dict(view.queue_usage)
        nominal = {q: float(spec.gpus) for q, spec in self.queues.items()}

        def unused(q: str) -> float:
            return max(0.0, nominal.get(q, 0.0) - usage.get(q, 0.0))
        lent_total = sum(unused(q) for q in nominal)
        scr = Scratch(view.state)
        out: list[Decision] = []
        gone: set[int] = set()
        failed: dict[tuple, int] = {}   # (queue, types, share) -> smallest gang that could not start
        jobs = view.queue[:int(self.options.get("depth", 500))]
        if not view.full:  # nothing was freed: only new arrivals can start (or reclaim)
            jobs = [j for j in jobs if j.id in view.new]
        for job in jobs:
            q, g = job.queue, job.gpu_share
            shape = (q, job.types, job.milli)
            if failed.get(shape, 1 << 62) <= job.gpus:
                continue
            used = usage.get(q, 0.0)
            within = not self.queues or used + g <= nominal.get(q, 0.0) + 1e-9   # no queues: no quotas
            if not within:
                ceiling = nominal.get(q, 0.0) + min(self._limit(q), sum(v for x, v in nominal.items() if x != q))
                if g > ceiling + 1e-9:   # Kueue calls it inadmissible
                    out.append(Reject(job, f"asks for {job.gpus} GPUs, more than queue {q!r} can ever get "
                                           f"(its quota plus what it may borrow: {ceiling:g})"))
                    continue
                over = used + g - nominal.get(q, 0.0)
                lent = lent_total - unused(q)
                if over > min(lent, self._limit(q)) + 1e-9:
                    continue
            gpus = self.place(view, scr, job)
            if gpus is None and within:
                gpus, victims, scr2 = self._reclaim(view, scr, job, usage, gone)
                if gpus is not None:
                    for v in victims:
                        out.append(Preempt(v))
                        gone.add(v.id)
                        lent_total -= unused(v.queue)
                        usage[v.queue] -= v.gpu_share
                        lent_total += unused(v.queue)
                    scr = scr2
            if gpus is None:
                failed[shape] = min(failed.get(shape, 1 << 62), job.gpus)
                continue
            scr.take(gpus, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, gpus))
            lent_total -= unused(q)
            usage[q] = usage.get(q, 0.0) + g
            lent_total += unused(q)
        return out

    def _reclaim(self, view: View, scr: Scratch, job: Job, usage: dict[str, float], gone: set[int]):
        """Victims from borrowing queues, then lower priority ones of the job's own queue."""
        def borrowing(v: Job) -> bool:
            return v.queue != job.queue and usage.get(v.queue, 0.0) > self._nominal(v.queue) + 1e-9
        cands = [v for v in view.running.values() if v.id not in gone and v.kind != "pipeline"
                 and (borrowing(v) or v.queue == job.queue and v.priority < job.priority)]
        cands.sort(key=lambda v: (not borrowing(v), v.priority, -v.run_start, -v.id))
        trial = _clone(scr)
        chosen: list[Job] = []
        lent_back: dict[str, float] = {}
        for v in cands:
            if borrowing(v) and usage[v.queue] - lent_back.get(v.queue, 0.0) <= self._nominal(v.queue) + 1e-9:
                continue  # that queue is back within its quota
            chosen.append(v)
            lent_back[v.queue] = lent_back.get(v.queue, 0.0) + v.gpu_share
            trial.give(v.alloc, v.milli, v.cpu_milli, v.mem_mib)
            g = self.place(view, trial, job)
            if g is not None:
                return g, chosen, trial
        return None, [], scr
