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

Slurm partitions (the scenario's `queues` with `nodes:` and `priority_tier:`, see
node_sets.py): a job starts only on its partition's nodes, and jobs of a higher
PriorityTier come before any job of a lower one (Slurm sorts the queue by tier, then
priority). With node sets a reservation is on the nodes its job may use (its
partition's, of the GPU type whose shadow is earliest): a later job placed wholly
outside them never delays it; one that needs them must end before the shadow or fit in
the extra GPUs, as above. Besides the head, the first blocked job of each partition that
shares no node with an earlier reservation gets one too (disjoint partitions would
otherwise starve their big jobs). A job larger than its partition is rejected (Slurm
leaves it pending for ever with reason PartitionNodeLimit).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import ClassVar

import numpy as np

from gpucluster.sim.jobs import Job
from gpucluster.sim.node_sets import DEFAULT_TIER, partition_of, resolve, tiers
from gpucluster.sim.placement import Scratch, free_whole
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Reject, Start, View

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
        self.tiers = tiers(self.queues)    # Slurm PriorityTier per partition
        self._with_nodes = any(getattr(q, "nodes", None) is not None for q in self.queues.values())
        self._masks: dict[str, np.ndarray] | None = None   # partition -> its nodes (from the first view)
        self._rooms: dict[tuple, int] = {}

    # -- Slurm partitions -------------------------------------------------------------
    def key(self, job: Job) -> tuple:
        """Slurm's queue order: PriorityTier of the job's partition, then priority, then submission."""
        if self.tiers:
            return (-self.tier_of(job), -job.priority, job.submit, job.seq)
        return super().key(job)

    def tier_of(self, job: Job) -> int:
        return self.tiers.get(partition_of(job), DEFAULT_TIER)

    def partition_masks(self, state) -> dict[str, np.ndarray]:
        if self._masks is None:
            self._masks = resolve(state, self.queues)[0] if self._with_nodes else {}
        return self._masks

    def part_mask(self, view: View, job: Job) -> np.ndarray | None:
        """The nodes of the job's partition; None: every node."""
        return self.partition_masks(view.state).get(partition_of(job)) if self._with_nodes else None

    def place(self, view: View, scr: Scratch, job: Job, extra_mask: np.ndarray | None = None,
              gpu_type: str | None = None) -> np.ndarray | None:
        own = self.part_mask(view, job)
        if own is not None:
            extra_mask = own if extra_mask is None else extra_mask & own
        return super().place(view, scr, job, extra_mask, gpu_type)

    def partition_room(self, view: View, job: Job) -> int | None:
        """GPUs (a share: 1) of its types the job's partition has; None without a node set."""
        own = self.part_mask(view, job)
        if own is None:
            return None
        types = tuple(view.types_for(job))
        key = (partition_of(job), types, job.milli < 1000)
        room = self._rooms.get(key)
        if room is None:
            st, room = view.state, 0
            for t in types:
                m = own if t is None else own & (st.node_type == st.type_index[t])
                if m.any():
                    room = max(room, 1 if job.milli < 1000 else int(st.node_gpus[m].sum()))
            self._rooms[key] = room
        return room

    def too_big(self, view: View, job: Job) -> Reject | None:
        room = self.partition_room(view, job)
        if room is None or job.gpu_share <= room:
            return None
        return Reject(job, f"asks for {job.gpus} GPUs, more than its partition {partition_of(job)!r} has of its "
                           f"GPU types ({room})")

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
        if self._with_nodes:
            return self._schedule_sets(view)
        scr, it, out, head = self._start_until_blocked(view, sized=False)
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

    def _start_until_blocked(self, view: View, sized: bool) -> tuple[Scratch, Iterator[Job], list[Decision], Job | None]:
        """EASY's FIFO part: start jobs in the policy's order until one does not fit. Returns the
        free resources left, the jobs after that one, the decisions so far and the blocked job
        (the head; None when all started). `sized`: with node sets, a job larger than its
        partition is rejected on the way instead of blocking it forever."""
        scr = Scratch(view.state)
        it = iter(self.order(view))
        out: list[Decision] = []
        for job in it:
            if job.time_limit_s is not None:
                self._limits = self.by_limit
            if sized:
                rej = self.too_big(view, job)
                if rej is not None:
                    out.append(rej)
                    continue
            g = self.place(view, scr, job)
            if g is None:
                return scr, it, out, job
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        return scr, it, out, None

    # -- with partition node sets -----------------------------------------------------
    def _schedule_sets(self, view: View) -> list[Decision]:
        """EASY backfill where each job has its partition's nodes and a reservation is a node set
        (the general form of the per-type rule above; kept apart so runs without node sets keep
        their hot path). The head gets a reservation, and so does each later job that does not fit
        and whose partition shares no node with an earlier reservation: disjoint partitions each
        protect their first blocked job, as Slurm's per-job backfill plan does."""
        scr, it, out, head = self._start_until_blocked(view, sized=True)
        if head is None:
            return out
        st = view.state
        resv: list[list] = []          # [shadow, extra GPUs, reserved nodes]
        reserved = np.zeros(len(st.nodes), dtype=bool)
        shadow, extra, rmask = self._reservation_sets(view, scr, head, out)
        if rmask is not None:
            resv.append([shadow, extra, rmask])
            reserved |= rmask
        for job in islice(it, self.depth):
            g = None
            # a job looked at in an earlier pass with nothing freed since still does not fit: it is
            # only a candidate for a reservation
            if view.full or job.id in view.new:
                if job.time_limit_s is not None:
                    self._limits = self.by_limit
                rej = self.too_big(view, job)
                if rej is not None:
                    out.append(rej)
                    continue
                g = self.place(view, scr, job, extra_mask=~reserved) if resv else self.place(view, scr, job)
                if g is None and resv:   # on reserved nodes: only if it delays none of their reservations
                    g = self._place_around(view, scr, job, resv)
            if g is None:
                own, room = self.part_mask(view, job), self.partition_room(view, job)
                if own is not None and room is not None and job.gpu_share <= room and not (own & reserved).any():
                    shadow, extra, rmask = self._reservation_sets(view, scr, job, out)
                    if rmask is not None:
                        resv.append([shadow, extra, rmask])
                        reserved |= rmask
                continue
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        return out

    def _place_around(self, view: View, scr: Scratch, job: Job, resv: list[list]) -> np.ndarray | None:
        """A placement that may use reserved nodes: each reservation it touches must see it end
        before the shadow time or have the spare GPUs it takes there (which it then uses up)."""
        st = view.state
        for t in self.types_order(view, job):
            g = self.place(view, scr, job, gpu_type=t) if t is not None else self.place(view, scr, job)
            if g is None:
                continue
            nodes = st.gpu_node[g]
            end = view.now + self.estimate(job, t)
            takes = []
            for r in resv:
                inside = int(np.count_nonzero(r[2][nodes]))
                if inside and end > r[0]:
                    takes.append((r, inside * job.milli / 1000))
            if all(need <= r[1] + 1e-9 for r, need in takes):
                for r, need in takes:
                    r[1] -= need
                return g
        return None

    def _releases_in(self, view: View, mask: np.ndarray, t: str | None, started: list) -> tuple[np.ndarray, np.ndarray]:
        """(planned ends ascending, GPUs freed on `mask`'s nodes by then cumulatively)."""
        st = view.state
        ends, gpus = [], []
        for j in view.running.values():
            if j.alloc is None:
                continue
            n = int(np.count_nonzero(mask[st.gpu_node[j.alloc]]))
            if n:
                ends.append(self.planned_end(j))
                gpus.append(n * j.milli / 1000)
        for s in started:
            n = int(np.count_nonzero(mask[st.gpu_node[s.gpus]]))
            if n:
                ends.append(view.now + self.estimate(s.job, t))
                gpus.append(n * s.job.milli / 1000)
        e = np.array(ends, dtype=float)
        order = np.argsort(e, kind="stable")
        return e[order], np.cumsum(np.array(gpus, dtype=float)[order])

    def _reservation_sets(self, view: View, scr: Scratch, head: Job,
                          started: list) -> tuple[float, float, np.ndarray | None]:
        st = view.state
        own = self.part_mask(view, head)
        best: tuple[float, float, np.ndarray | None] = (INF, INF, None)
        need = head.gpu_share
        for t in view.types_for(head):
            m = view.mask(t)
            if own is not None:
                m = own if m is None else m & own
            if m is None:
                m = np.ones(len(st.nodes), dtype=bool)
            free_now = free_whole(scr, m)
            ends, cum = self._releases_in(view, m, t, [s for s in started if isinstance(s, Start)])
            k = int(np.searchsorted(free_now + cum, need - 1e-9)) if free_now < need else 0
            if k >= len(ends):
                continue   # never enough on these nodes for now
            shadow, extra = float(ends[k]), free_now + float(cum[k]) - need
            if shadow < best[0]:
                best = (shadow, extra, m)
        return best
