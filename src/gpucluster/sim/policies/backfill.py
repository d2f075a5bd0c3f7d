"""EASY backfill with Slurm's semantics (Lifka 1995; Mu'alem and Feitelson 2001).

Jobs start in queue order while they fit. The first that does not (the head) gets
a reservation: the earliest time (shadow) at which the running jobs' expected
ends free enough GPUs of a type it can use, and the GPUs spare at that time
(extra). A later job may start now if it fits and either ends before the shadow
or uses no more than the extra GPUs, so it never delays the head. At most `depth`
queued jobs are examined per pass (Slurm's bf_max_job_test, default 500).

Counts are GPUs of the head's type, as in the classical formulation; run times are
the simulator's expected ones (perfect estimates; Slurm uses the time limit).
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
    options_doc: ClassVar[dict[str, str]] = {"depth": "queued jobs examined per pass (Slurm bf_max_job_test, default 500)"}

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        self.depth = int(self.options.get("depth", 500))
        self._cache: tuple | None = None   # (head id, epoch, shadow, extra, type)

    def schedule(self, view: View) -> list[Decision]:
        scr = Scratch(view.state)
        it = iter(view.queue)
        out: list[Decision] = []
        head = None
        for job in it:  # FIFO part: start in order until one does not fit
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
        for job in islice(it, self.depth):
            if not view.full and job.id not in new:
                continue
            # types it may use now: any type but the head's; the head's only if it ends before the
            # shadow time or fits in the extra GPUs (so it cannot delay the head)
            ok = [t for t in self.types_order(view, job)
                  if shadow == INF or (rtype is not None and t != rtype)
                  or view.now + job.est_duration(t) <= shadow or job.gpu_share <= extra]
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
            if shadow < INF and (rtype is None or t == rtype) and view.now + job.est_duration(t) > shadow:
                extra -= job.gpu_share
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        self._cache = (head.id, view.epoch, shadow, extra, rtype)
        return out

    def reservation(self, view: View, scr: Scratch, head: Job, started: list) -> tuple[float, float, str | None]:
        c = self._cache
        if c is not None and c[0] == head.id and c[1] == view.epoch and not started:
            return c[2], c[3], c[4]
        st = view.state
        best = (INF, 0.0, None)
        need = head.gpu_share
        for t in view.types_for(head):
            tidx = None if t is None else st.type_index[t]
            free_now = free_whole(scr, view.mask(t))
            ends, cum = view.running_table.releases(tidx)
            if started:  # jobs started earlier in this pass release their GPUs too
                mine = [(view.now + s.job.est_duration(t), s.job.gpu_share) for s in started
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
