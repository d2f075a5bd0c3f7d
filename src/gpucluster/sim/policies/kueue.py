"""ClusterQueues, cohorts and ResourceFlavors, admitted and preempted as Kueue does.

Each queue (a Kueue ClusterQueue) has a nominal GPU quota per ResourceFlavor (a
GPU type of the cluster; `gpus:` is one quota over every type) and belongs to a
cohort. The quota arithmetic (guaranteed part, lendable pool, borrowing and lending
limits, fair share) is in kueue_quota.py. One scheduling pass, as Kueue's cycle:

* each queue's waiting jobs are in priority then arrival order; the heads of all
  queues compete, ordered as Kueue's scheduler orders them: jobs that fit in their
  queue's nominal quota before jobs that would borrow, then (fair sharing) the
  lowest share the queue would have once the job is admitted, then priority, then
  arrival. The winner is admitted, the heads are re-ranked; BestEffortFIFO moves on
  to a queue's next job when its head does not fit, StrictFIFO stops that queue.
* flavors are tried in the queue's order: the first whose quota (borrowing if it
  must: whenCanBorrow Borrow) and whose nodes hold the job now. A job admitted on
  a flavor runs on that GPU type.
* when none fits, preemption (whenCanPreempt TryNextFlavor: the first flavor where
  it works): candidates are workloads of other queues of the cohort that borrow that
  flavor (reclaimWithinCohort: only when the job then fits in its own nominal quota;
  LowerPriority or Any) and lower-priority workloads of its own queue
  (withinClusterQueue: LowerPriority, or LowerOrNewerEqualPriority). Kueue's order:
  other queues first, lowest priority first, most recently started first; a queue
  stops being a candidate once it no longer borrows; then the victims not needed
  after all are given back, last chosen first (Kueue's minimal set).

Jobs larger than their queue could ever hold (quota plus what it may borrow) are
rejected as inadmissible. Without queues in the scenario there are no quotas: one
queue, priority order, lower-priority jobs preempted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Preempt, Reject, Start, View
from gpucluster.sim.policies.kueue_quota import ANY, EPS, INF, Quotas, resolve_flavor
from gpucluster.sim.policies.las import _clone
from gpucluster.specs.scenario import KueuePreemption

NO_PREEMPTION_SPEC = KueuePreemption()


@policies.register("kueue", "quota", "quotas")
class KueueLike(Policy):
    name = "kueue"
    summary = ("Kueue: ClusterQueues with a GPU quota per flavor in cohorts, borrowing and lending limits, "
               "fair sharing, preemption to reclaim")
    options_doc: ClassVar[dict[str, str]] = {
        "depth": "jobs examined per pass (default 500)",
        "fair_sharing": "order admissions by the queues' weighted borrowed share (default: on when a queue "
                        "sets fair_sharing)"}

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        fs = self.options.get("fair_sharing")
        self.fair = bool(fs) if fs is not None else any(q.fair_sharing is not None for q in self.queues.values())
        self.unlimited = not self.queues
        self.quotas: Quotas | None = None
        self.usage: dict[tuple[str, str], float] = {}
        self.prio: Counter = Counter()          # priorities of running jobs (is anyone preemptible?)
        self.hooked = False

    # -- bookkeeping ------------------------------------------------------------------
    def prepare(self, sim: Any) -> None:
        types = list(sim.state.types)
        self.quotas = Quotas(self.queues, lambda name: resolve_flavor(name, types) or name)
        sim.hooks_start.append(self._started)
        sim.hooks_stop.append(self._stopped)
        self.hooked = True

    @property
    def _quotas(self) -> Quotas:
        """The quotas: made by prepare() (or the first schedule) before any job starts."""
        if self.quotas is None:
            raise RuntimeError("the kueue policy schedules before prepare()")
        return self.quotas

    def _flavor(self, job: Job) -> str:
        self._q(job.queue)
        return self._quotas.flavor_of(job.queue, job.placed_type)   # started or stopping: placed

    def _q(self, queue: str) -> str:
        if queue not in self._quotas.flavors:
            self._quotas.add_queue(queue)
        return queue

    def _started(self, job: Job) -> None:
        key = (job.queue, self._flavor(job))
        self.usage[key] = self.usage.get(key, 0.0) + job.gpu_share
        self.prio[job.priority] += 1

    def _stopped(self, job: Job, why: str) -> None:
        key = (job.queue, self._flavor(job))
        self.usage[key] -= job.gpu_share
        self.prio[job.priority] -= 1
        if not self.prio[job.priority]:
            del self.prio[job.priority]

    def _sync(self, view: View) -> None:
        """Without the simulator's hooks (a policy driven by hand): usage from the running jobs."""
        if self.quotas is None:
            self.quotas = Quotas(self.queues, lambda n: resolve_flavor(n, list(view.state.types)) or n)
        if not self.hooked:
            self.usage, self.prio = {}, Counter()
            for j in view.running.values():
                self._started(j)

    # -- quota ----------------------------------------------------------------------------
    def _available(self, q: str, f: str, usage: dict) -> float:
        return INF if self.unlimited else self._quotas.available(q, f, usage)

    def _borrows(self, q: str, f: str, usage: dict, extra: float = 0.0) -> bool:
        return not self.unlimited and self._quotas.borrowing(q, f, usage, extra)

    def _flavors_for(self, view: View, job: Job) -> list[str]:
        """The queue's flavors the job may run on, in the queue's order."""
        out = []
        for f in self._quotas.flavors[job.queue]:
            if f == ANY:
                if view.types_for(job):
                    out.append(f)
            elif (f in view.state.type_index and (job.types is None or f in job.types)
                  and (not job.speeds or job.speed_on(f) > 0)):
                out.append(f)
        return out

    def _key(self, job: Job, flavors: list[str], usage: dict) -> tuple:
        """Kueue's entry order: within nominal quota first, (fair sharing) lower share, priority, FIFO."""
        r, borrows, share = job.gpu_share, True, 0.0
        for f in flavors:
            if r <= self._available(job.queue, f, usage) + EPS:
                borrows = self._borrows(job.queue, f, usage, r)
                if self.fair:
                    share = self._quotas.share(job.queue, usage, f, r)
                break
        return (borrows, share, -job.priority, job.submit, job.seq)

    # -- the pass -------------------------------------------------------------------------
    def schedule(self, view: View) -> list[Decision]:
        jobs = view.queue[:int(self.options.get("depth", 500))]
        if not view.full:  # nothing was freed: only new arrivals can start (or reclaim)
            jobs = [j for j in jobs if j.id in view.new]
        if not jobs:
            return []
        self._sync(view)
        usage = dict(self.usage)
        lists: dict[str, list[Job]] = {}
        for j in jobs:
            lists.setdefault(j.queue, []).append(j)
        for q in lists:
            self._q(q)
        fl_cache: dict[tuple, list[str]] = {}   # (queue, types, speeds) -> flavors, once per pass
        scr = Scratch(view.state)
        out: list[Decision] = []
        gone: set[int] = set()
        failed: dict[tuple, int] = {}           # (flavor, types, share) -> smallest gang that did not fit
        no_start: dict[tuple, int] = {}         # (queue, types, share, priority) -> smallest gang not admitted

        def flavors_of(j: Job) -> list[str]:
            k = (j.queue, j.types, id(j.speeds) if j.speeds else None)
            fl = fl_cache.get(k)
            if fl is None:
                fl = fl_cache[k] = self._flavors_for(view, j)
            return fl

        for job in self._order(lists, usage, flavors_of):
            # a larger gang of the same queue, shape and priority cannot start either this pass (quota,
            # free GPUs and preemption candidates only shrink until a preemption gives some back)
            shape = (job.queue, job.types, job.milli, job.priority)
            if not job.cpu_milli and no_start.get(shape, 1 << 62) <= job.gpus:
                ok = False
            else:
                n_gone = len(gone)
                ok, decisions, scr = self._admit(view, job, flavors_of(job), usage, scr, gone, failed)
                out.extend(decisions)
                if len(gone) > n_gone:
                    no_start.clear()
                elif not ok and not decisions and not job.cpu_milli:
                    no_start[shape] = min(no_start.get(shape, 1 << 62), job.gpus)
            if not ok:
                spec = self.queues.get(job.queue)
                if spec is not None and spec.queueing_strategy == "StrictFIFO":
                    lists[job.queue] = []        # the head blocks its queue for this pass
        return out

    def _order(self, lists: dict[str, list[Job]], usage: dict, flavors_of):
        """The queues' heads in Kueue's entry order, re-ranked after each admission (the caller
        updates `usage`); a queue emptied by the caller (StrictFIFO) stops."""
        if len(lists) == 1:
            (q, lst), = lists.items()
            for i in range(len(lst)):
                if not lists[q]:
                    return
                yield lst[i]
            return
        ptr = dict.fromkeys(lists, 0)
        while True:
            best: str | None = None
            best_key: tuple | None = None
            for q, lst in lists.items():
                if ptr[q] >= len(lst):
                    continue
                j = lst[ptr[q]]
                key = self._key(j, flavors_of(j), usage)
                if best_key is None or key < best_key:
                    best, best_key = q, key
            if best is None:
                return
            ptr[best] += 1
            yield lists[best][ptr[best] - 1]

    def _admit(self, view: View, job: Job, flv: list[str], usage: dict, scr: Scratch, gone: set[int],
               failed: dict) -> tuple[bool, list[Decision], Scratch]:
        q, r = job.queue, job.gpu_share
        if not flv:
            have = ", ".join(self._quotas.flavors[q])
            return False, [Reject(job, f"no flavor of queue {q!r} ({have}) is a GPU type it can run on")], scr
        if not self.unlimited:
            ceiling = max(self._quotas.ceiling(q, f) for f in flv)
            if r > ceiling + EPS:   # Kueue calls it inadmissible
                return False, [Reject(job, f"asks for {job.gpus} GPUs, more than queue {q!r} can ever get "
                                           f"(its quota plus what it may borrow: {ceiling:g})")], scr
        for f in flv:
            if r > self._available(q, f, usage) + EPS:
                continue
            shape = (f, job.types, job.milli)
            if not job.cpu_milli and failed.get(shape, 1 << 62) <= job.gpus:
                continue
            g = self.place(view, scr, job, gpu_type=None if f == ANY else f)
            if g is None:
                if not job.cpu_milli:
                    failed[shape] = min(failed.get(shape, 1 << 62), job.gpus)
                continue
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            usage[(q, f)] = usage.get((q, f), 0.0) + r
            return True, [Start(job, g)], scr
        for f in flv:
            got = self._preempt(view, job, f, usage, scr, gone)
            if got is None:
                continue
            victims, g, trial, u = got
            trial.take(g, job.milli, job.cpu_milli, job.mem_mib)
            usage.clear()
            usage.update(u)
            usage[(q, f)] = usage.get((q, f), 0.0) + r
            gone.update(v.id for v in victims)
            failed.clear()   # GPUs came back: sizes that failed may fit now
            return True, [*(Preempt(v) for v in victims), Start(job, g)], trial
        return False, [], scr

    # -- preemption -------------------------------------------------------------------------
    def _preempt(self, view: View, job: Job, f: str, usage: dict, scr: Scratch, gone: set[int]):
        Q, q, r = self._quotas, job.queue, job.gpu_share
        spec = self.queues.get(q)
        pol = spec.preemption if spec is not None else NO_PREEMPTION_SPEC
        low = min(self.prio) if self.prio else INF
        lower_exists = low < job.priority or (low == job.priority
                                              and pol.within_cluster_queue == "LowerOrNewerEqualPriority")
        reclaim = (not self.unlimited and pol.reclaim_within_cohort != "Never"
                   and not self._borrows(q, f, usage, r)
                   and any(self._borrows(x, f, usage) for x in Q.members[Q.cohort[q]] if x != q))
        if not reclaim and (pol.within_cluster_queue == "Never" or not lower_exists):
            return None
        cands = []
        for v in view.running.values():
            if v.id in gone or v.kind == "pipeline":
                continue
            self._q(v.queue)
            if Q.cohort[v.queue] != Q.cohort[q] or Q.flavor_of(v.queue, v.placed_type) != f:
                continue
            if v.queue == q:
                w = pol.within_cluster_queue
                ok = (w != "Never" and v.priority < job.priority) or (
                    w == "LowerOrNewerEqualPriority" and v.priority == job.priority
                    and (v.submit, v.seq) > (job.submit, job.seq))
            else:
                ok = (reclaim and self._borrows(v.queue, f, usage)
                      and (pol.reclaim_within_cohort == "Any" or v.priority < job.priority))
            if ok:
                cands.append(v)
        if not cands:
            return None
        cands.sort(key=lambda v: (v.queue == q, v.priority, -v.run_start, -v.id))
        trial = _clone(scr)
        u = dict(usage)
        chosen: list[Job] = []
        gpu_type = None if f == ANY else f
        for v in cands:
            if v.queue != q and not self._borrows(v.queue, f, u):
                continue   # that queue is back within its quota
            chosen.append(v)
            u[(v.queue, f)] -= v.gpu_share
            trial.give(v.placed_alloc, v.milli, v.cpu_milli, v.mem_mib)
            if not self._fits(job, f, u, chosen):
                continue
            g = self.place(view, trial, job, gpu_type=gpu_type)
            if g is None:
                continue
            for w in reversed(chosen[:-1]):   # Kueue's minimal set: keep victims not needed after all
                trial.take(w.placed_alloc, w.milli, w.cpu_milli, w.mem_mib)
                u[(w.queue, f)] += w.gpu_share
                rest = [x for x in chosen if x is not w]
                g2 = self.place(view, trial, job, gpu_type=gpu_type) if self._fits(job, f, u, rest) else None
                if g2 is not None:
                    chosen, g = rest, g2
                else:
                    trial.give(w.placed_alloc, w.milli, w.cpu_milli, w.mem_mib)
                    u[(w.queue, f)] -= w.gpu_share
            return chosen, g, trial, u
        return None

    def _fits(self, job: Job, f: str, u: dict, victims: list[Job]) -> bool:
        """Quota after the victims leave; reclaiming from other queues must not end up borrowing."""
        q, r = job.queue, job.gpu_share
        if r > self._available(q, f, u) + EPS:
            return False
        return not any(v.queue != q for v in victims) or not self._borrows(q, f, u, r)
