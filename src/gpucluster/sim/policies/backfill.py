"""EASY backfill with Slurm's semantics (Lifka 1995; Mu'alem and Feitelson 2001).

Jobs start in queue order while they fit. The first that does not (the head) gets
a reservation: the earliest time (shadow) at which the running jobs' expected
ends free enough GPUs of a type it can use, and the GPUs spare at that time
(extra). A later job may start now if it fits and either ends before the shadow
or uses no more than the extra GPUs, so it never delays the head. At most `depth`
queued jobs are examined per pass (Slurm's bf_max_job_test, default 500).

Counts are GPUs of the head's type, as in the classical formulation. Run times are
planned as Slurm's sched/backfill plans them (option `estimate: limit`, the default):
a job's time limit is its run-time estimate, and a running job is expected to hold
its GPUs until start + limit; jobs without a time limit (generated workloads,
UNLIMITED ones) use their real run time. `estimate: runtime` plans every job with
its real run time (perfect estimates, the textbook EASY). A job that reaches its
limit is killed there (TIMEOUT) by the simulator, whatever the estimate.

The queue is taken in the policy's order (`order(view)`): the simulator's queue, or
the multifactor priority (multifactor.py) that re-sorts it as Slurm does.
"""

from __future__ import annotations

from itertools import islice
from typing import ClassVar

import numpy as np

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch, free_whole
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Start, View

INF = float("inf")


@policies.register("backfill", "easy", "easy-backfill")
class EasyBackfill(Policy):
    name = "backfill"
    summary = "EASY backfill: FIFO with a reservation for the head, later jobs fill the gaps"
    options_doc: ClassVar[dict[str, str]] = {
        "depth": "queued jobs examined per pass (Slurm bf_max_job_test, default 500)",
        "estimate": "run time the reservation plans with: limit (default; the job's time limit, as Slurm's "
                    "backfill; the real run time for jobs without one) or runtime (real run times: perfect "
                    "estimates)"}

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        self.depth = int(self.options.get("depth", 500))
        est = self.options.get("estimate", "limit")
        if est not in ("limit", "runtime"):
            from gpucluster.errors import UserError
            raise UserError(f"policy {self.name} option estimate is {est!r}; valid: limit, runtime",
                            field="policy_options.estimate")
        self.by_limit = est == "limit"
        self._limits = False               # a job with a time limit was seen (else: the running table's ends)
        self._cache: tuple | None = None   # (head id, epoch or state version, shadow, extra, type)

    def order(self, view: View):
        """Waiting jobs in the order the pass takes them."""
        return view.queue

    def estimate(self, job: Job, gpu_type: str | None) -> float:
        """Wall seconds the plan gives a job started now."""
        if self.by_limit and job.time_limit_s is not None:
            return job.time_limit_s
        return job.est_duration(gpu_type)

    def planned_end(self, job: Job) -> float:
        """When the plan expects a running job to free its GPUs."""
        if self.by_limit and job.time_limit_s is not None:
            return job.run_start + job.time_limit_s   # never the real end: Slurm does not know it
        return job.expected_end

    def schedule(self, view: View) -> list[Decision]:
        scr = Scratch(view.state)
        it = iter(self.order(view))
        out: list[Decision] = []
        head = None
        for job in it:  # FIFO part: start in order until one does not fit
            if job.time_limit_s is not None:
                self._limits = self.by_limit
            g = self.place(view, scr, job)
            if g is None:
                head = job
                break
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        if head is None:
            return out
        shadow, extra, rtype = self.reservation(view, scr, head, out)
        new = view.new
        failed: dict[tuple, int] = {}
        # without time limits the plan is the real run time: call it directly (this loop is the hot path)
        est = self.estimate if self._limits else Job.est_duration
        for job in islice(it, self.depth):
            if not view.full and job.id not in new:
                continue
            if job.time_limit_s is not None and not self._limits and self.by_limit:
                self._limits = True
                est = self.estimate
            # types it may use now: any type but the head's; the head's only if it ends before the
            # shadow time or fits in the extra GPUs (so it cannot delay the head)
            ok = [t for t in self.types_order(view, job)
                  if shadow == INF or (rtype is not None and t != rtype)
                  or view.now + est(job, t) <= shadow or job.gpu_share <= extra]
            if not ok:
                continue
            shape = (job.types, job.milli, tuple(ok))
            if failed.get(shape, 1 << 62) <= job.gpus:
                continue
            g = None
            for t in ok:
                g = self.place(view, scr, job, gpu_type=t) if t is not None else self.place(view, scr, job)
                if g is not None:
                    break
            if g is None:
                failed[shape] = min(failed.get(shape, 1 << 62), job.gpus)
                continue
            t = view.state.types[view.state.node_type[view.state.gpu_node[g[0]]]]
            if shadow < INF and (rtype is None or t == rtype) and view.now + est(job, t) > shadow:
                extra -= job.gpu_share
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        self._cache = (head.id, self._epoch(view), shadow, extra, rtype)
        return out

    def _epoch(self, view: View) -> int:
        # planned ends from time limits move whenever a job ends early, which the simulator does
        # not count as off-schedule: key the cached reservation on every change of the state then
        return view.state.version if self._limits else view.epoch

    def releases(self, view: View, tidx: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(planned ends ascending, GPUs freed by then cumulatively) of running jobs on a type."""
        if not self._limits:
            return view.running_table.releases(tidx)
        st = view.state
        jobs = [j for j in view.running.values() if tidx is None or st.type_index[j.placed_type] == tidx]
        ends = np.array([self.planned_end(j) for j in jobs], dtype=float)
        order = np.argsort(ends, kind="stable")
        return ends[order], np.cumsum(np.array([j.gpu_share for j in jobs], dtype=float)[order])

    def reservation(self, view: View, scr: Scratch, head: Job, started: list) -> tuple[float, float, str | None]:
        c = self._cache
        if c is not None and c[0] == head.id and c[1] == self._epoch(view) and not started:
            return c[2], c[3], c[4]
        st = view.state
        best: tuple[float, float, str | None] = (INF, 0.0, None)
        need = head.gpu_share
        for t in view.types_for(head):
            tidx = None if t is None else st.type_index[t]
            free_now = free_whole(scr, view.mask(t))
            ends, cum = self.releases(view, tidx)
            if started:  # jobs started earlier in this pass release their GPUs too
                mine = [(view.now + self.estimate(s.job, t), s.job.gpu_share) for s in started
                        if t is None or st.types[st.node_type[st.gpu_node[s.gpus[0]]]] == t]
                if mine:
                    e2 = np.concatenate((ends, [m[0] for m in mine]))
                    g2 = np.concatenate((np.diff(cum, prepend=0.0), [m[1] for m in mine]))
                    order = np.argsort(e2, kind="stable")
                    ends, cum = e2[order], np.cumsum(g2[order])
            k = int(np.searchsorted(free_now + cum, need - 1e-9)) if free_now < need else 0
            if k >= len(ends):
                continue  # never enough of this type (nodes down or too few): try another type
            shadow, extra = float(ends[k]), free_now + float(cum[k]) - need
            if shadow < best[0]:
                best = (shadow, extra, t)
        if best[0] == INF:
            return INF, INF, None   # the head cannot start on any type for now: it blocks nobody
        return best
