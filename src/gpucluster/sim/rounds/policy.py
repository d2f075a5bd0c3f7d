"""Gavel's round-based policies inside the event-driven simulator (`gpucluster simulate`).

Each policy asks for a pass every `round_s`; between rounds it starts nothing (a job that
arrives or a GPU that frees mid-round waits for the next round, as in Gavel). At a round
it recomputes the allocation if the set of jobs or the GPUs changed, runs the mechanism,
preempts the running jobs that lose their GPUs or move to another type (they checkpoint
on the way out, Preempt(save=True), and pay the workload's `restart_s` when they resume:
the switch cost) and starts the others on GPUs of their type.

Throughputs are the jobs' speeds per type (a Gavel trace's steps/s through the table,
the planner's, or 1 on every allowed type); remaining work is in the same unit.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch, place_whole
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Preempt, Start, View
from gpucluster.sim.rounds.mechanism import assign
from gpucluster.sim.state import WHOLE


class RoundPolicy(Policy):
    allocator_name: ClassVar[str] = ""
    options_doc: ClassVar[dict[str, str]] = {
        "round_s": "seconds per round (default 360, Gavel's)",
        "bisections": "finish-time fairness: bisection steps on rho (default 12)",
        "placement": "where a gang's GPUs go within its type: pack (default: fewest nodes, most free "
                     "first) or topology (the tightest leaf switch, else the fewest leaves)"}
    PLACEMENTS: ClassVar[tuple[str, ...]] = ("pack", "topology")

    def __init__(self, options: dict | None = None, queues: dict | None = None) -> None:
        super().__init__(options, queues)
        from gpucluster.sim.rounds import load_all
        self.round_s = float(self.options.get("round_s", 360.0))
        if not self.round_s > 0:
            from gpucluster.errors import UserError
            raise UserError(f"round_s must be > 0, got {self.round_s}", field="policy_options.round_s")
        self.tick_s = self.round_s
        place = self.options.get("placement", "pack")
        if place not in self.PLACEMENTS:
            from gpucluster.errors import UserError
            raise UserError(f"placement must be one of {', '.join(self.PLACEMENTS)}, got {place!r}",
                            field="policy_options.placement")
        self.gang_placement = place
        self.alloc = load_all().get(self.allocator_name)(
            {k: v for k, v in self.options.items() if k not in ("round_s", "placement")}, seed=0)
        self.prices: dict[str, float] = {}
        self.last_round: float | None = None
        self.key_ids: tuple = ()
        self.key_cap: tuple = ()
        self.X = np.zeros((0, 0))
        self.received: dict[int, np.ndarray] = {}
        self.service: dict[int, float] = {}
        self.since = 0.0
        self.allocations = 0

    def prepare(self, sim: Any) -> None:
        # A job that moves or resumes reloads for restart_s at each round it (re)starts in: at
        # restart_s >= round_s a job sliced every round never gets past its reload (Gavel's engine
        # refuses switch_s >= round_s). Without a horizon such a run may never end: refused; with
        # one it ends at the horizon: said in the notes.
        slow = max((j.restart_s for j in sim.jobs if j.kind != "replica"), default=0.0)
        if slow >= self.round_s:
            why = (f"a workload's restart_s ({slow:g} s) is not below the policy's round_s ({self.round_s:g} s): "
                   f"a job moved or time-sliced every round never gets past its reload")
            if sim.cfg.horizon_s is None:
                from gpucluster.errors import UserError
                raise UserError(why + "; lower restart_s, raise policy_options.round_s, or set horizon_days",
                                field="policy_options.round_s")
            sim.notes.append(why + " (the run stops at the horizon)")
        self.prices = dict(getattr(sim, "prices", {}))
        self.alloc.rng = np.random.default_rng(sim.kernel.seed if hasattr(sim.kernel, "seed") else 0)

    def key(self, job: Job) -> tuple:
        return (job.submit, job.seq)

    def schedule(self, view: View) -> list[Decision]:
        now = view.now
        r = now / self.round_s
        if abs(r - round(r)) > 1e-9 or self.last_round == now:
            return []
        st = view.state
        types = list(st.pool_types)
        K = len(types)
        elapsed = now - self.last_round if self.last_round is not None else 0.0
        self.last_round = now
        for j in view.running.values():   # what the last round gave
            if j.gpu_type in types:
                k = types.index(j.gpu_type)
                self.received.setdefault(j.id, np.zeros(K))[k] += elapsed
                self.service[j.id] = self.service.get(j.id, 0.0) + elapsed
        self.since += elapsed
        # by id: a job may be both running (view) and queued within one pass
        live = {j.id: j for j in [*view.running.values(), *view.queue]}
        jobs = sorted(live.values(), key=lambda j: (j.submit, j.seq))
        if not jobs:
            return []
        usable = st.usable
        cap = np.array([int(st.node_gpus[usable & (st.node_type == st.type_index[t])].sum()) for t in types])
        ids = tuple(j.id for j in jobs)
        if ids != self.key_ids or tuple(cap) != self.key_cap:
            self._allocate(jobs, types, cap, now)
            self.key_ids, self.key_cap = ids, tuple(cap)
        scale = np.array([j.gpus if j.milli >= 1000 else 1 for j in jobs], dtype=np.int64)
        rec = np.array([self.received.get(j.id, np.zeros(K)) for j in jobs])
        svc = np.array([self.service.get(j.id, 0.0) / max(now - j.submit, 1.0) for j in jobs])
        asg = assign(self.X, rec, self.since, scale, cap, svc)
        return self._decisions(view, jobs, types, asg)

    def _allocate(self, jobs: list[Job], types: list[str], cap: np.ndarray, now: float) -> None:
        from gpucluster.sim.rounds.allocation import Problem
        T = np.array([[0.0 if (j.types is not None and t not in j.types) else
                       (j.speed_on(t) if j.speeds else 1.0) for t in types] for j in jobs])
        scale = np.array([j.gpus if j.milli >= 1000 else 1 for j in jobs], dtype=np.int64)
        prices = np.array([self.prices.get(t, 1.0) for t in types])
        if hasattr(self.alloc, "type_names"):   # fifo_gavel_code orders the types by name, as Gavel's code
            self.alloc.type_names = list(types)
        p = Problem(np.array([j.id for j in jobs]), T, scale, cap, prices,
                    np.array([now - j.submit for j in jobs]), np.array([j.remaining() for j in jobs]))
        self.X = self.alloc.allocate(p)
        self.allocations += 1
        self.received = {j.id: np.zeros(len(types)) for j in jobs}   # counters restart with the allocation
        self.since = 0.0

    def _decisions(self, view: View, jobs: list[Job], types: list[str], asg: np.ndarray) -> list[Decision]:
        scr = Scratch(view.state)
        out: list[Decision] = []
        for j, k in zip(jobs, asg.tolist(), strict=True):
            if j.id in view.running and (k < 0 or types[k] != j.gpu_type):
                out.append(Preempt(j, save=True))
                scr.give(j.placed_alloc, j.milli, j.cpu_milli, j.mem_mib)    # a running job
        for j, k in zip(jobs, asg.tolist(), strict=True):
            if k < 0 or (j.id in view.running and types[k] == j.gpu_type):
                continue
            t = types[k] if len(types) > 1 else None
            if j.milli >= WHOLE:
                g = place_whole(scr, j.gpus, view.mask(t), self.gang_placement, j.cpu_milli, j.mem_mib, view.frag)
            else:
                g = self.place(view, scr, j, gpu_type=t)
            if g is None:
                continue    # fragmented nodes: the job waits for the next round
            scr.take(g, j.milli, j.cpu_milli, j.mem_mib)
            out.append(Start(j, g))
        return out


_POLICIES = [
    ("max_min_fairness_perf", "max_min_fairness_perf", ("las-perf", "gavel-las-perf"),
     "Gavel's heterogeneity-aware max-min fairness (LAS over normalised throughput), LP each change, 360 s rounds"),
    ("max_min_fairness", "max_min_fairness", ("gavel-las",),
     "Gavel's agnostic max-min fairness (LAS over time shares), LP each change, 360 s rounds"),
    ("fifo_perf", "fifo_perf", ("gavel-fifo-perf",),
     "Gavel's FIFO on the fastest type with room (re-placed at each change), 360 s rounds"),
    ("gavel_fifo", "fifo", ("fifo-agnostic",),
     "Gavel's agnostic FIFO (a random type per job, kept), 360 s rounds"),
    ("gavel_fifo_code", "fifo_gavel_code", ("fifo-gavel-code",),
     "Gavel's agnostic FIFO as its code places jobs: a completed job's type to the head of the queue, "
     "else the last type in name order with room for the gang, kept; 360 s rounds"),
    ("finish_time_fairness_perf", "finish_time_fairness_perf", ("themis-perf",),
     "finish-time fairness (Themis, as in Gavel), heterogeneity-aware, bisection over LPs"),
    ("finish_time_fairness", "finish_time_fairness", ("themis",),
     "finish-time fairness (Themis, as in Gavel), agnostic"),
    ("throughput_per_dollar_perf", "throughput_per_dollar_perf", ("cost-perf", "max_sum_throughput_normalized_by_cost_perf"),
     "Gavel's cost policy: maximise normalised throughput per dollar of GPU time (LP)"),
]

for _name, _alloc, _aliases, _summary in _POLICIES:
    policies.add(_name, type(f"Round_{_name}", (RoundPolicy,), {
        "name": _name, "summary": _summary, "allocator_name": _alloc}), _aliases)
