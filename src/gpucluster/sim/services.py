"""Inference services: replicas autoscaled on a request-rate curve.

Every `autoscale_s` the autoscaler sets the desired replica count to
ceil(rate / (replica_rps x target_utilization)), clamped to [min, max]. Scaling
down waits for the largest desired count of the last 5 minutes (Kubernetes HPA's
default downscale stabilisation window, 300 s). A replica is a job of kind
`replica` (its service's priority and queue) that serves after `cold_start_s`;
one killed by a node failure is queued again.

Between two ticks the demand is the rate at the first (left sum); requests above
the ready replicas' capacity count as SLO misses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpucluster.sim.jobs import PENDING, RUNNING, Job
from gpucluster.sim.workload import Context, allowed_types, generators

STABILISATION_S = 300.0


def rate_at(curve: Any, t: float) -> float:
    h = t / 3600.0
    if curve.kind == "constant":
        return curve.mean_rps
    if curve.kind == "diurnal":
        return curve.mean_rps * (1 + curve.amplitude * math.cos(2 * math.pi * (h % 24 - curve.peak_hour) / 24))
    pts = np.asarray(curve.points, dtype=float)
    if curve.period_hours:
        h = h % curve.period_hours
    return float(np.interp(h, pts[:, 0], pts[:, 1]))


@dataclass
class Service:
    index: int
    spec: Any
    start_s: float
    end_s: float | None
    types: frozenset[str] | None
    replicas: list[Job] = field(default_factory=list)     # active (pending or running)
    history: list[tuple[float, int]] = field(default_factory=list)
    ended: bool = False
    last_t: float | None = None
    last_rate: float = 0.0
    demand: float = 0.0          # requests
    served: float = 0.0
    miss_s: float = 0.0          # seconds under-provisioned
    busy_gpu_s: float = 0.0      # replica GPU-seconds weighted by load
    ready_gpu_s: float = 0.0
    peak_replicas: int = 0


class Autoscaler:
    def __init__(self, sim: Any, services: list[Service], new_id) -> None:
        self.sim, self.services, self.new_id = sim, services, new_id

    def begin(self) -> None:
        from gpucluster.sim.simulator import P_SCALE
        for s in self.services:
            self.sim.kernel.at(s.start_s, P_SCALE, self._tick, s)
            if s.end_s is not None:
                self.sim.kernel.at(s.end_s, P_SCALE, self._end, s)

    def _ready(self, s: Service, now: float) -> int:
        return sum(1 for r in s.replicas if r.state == RUNNING and now >= r.run_start + r.restart_s)

    def _account(self, s: Service, now: float) -> None:
        if s.last_t is not None and now > s.last_t:
            dt = now - s.last_t
            cap = self._ready(s, s.last_t) * s.spec.replica_rps
            served = min(s.last_rate, cap)
            s.demand += s.last_rate * dt
            s.served += served * dt
            if s.last_rate > cap + 1e-9:
                s.miss_s += dt
            ready = self._ready(s, s.last_t)
            s.ready_gpu_s += ready * s.spec.gpus_per_replica * dt
            if cap > 0:
                s.busy_gpu_s += ready * s.spec.gpus_per_replica * dt * served / cap
        s.last_t = now
        s.last_rate = rate_at(s.spec.rate, now) if not s.ended else 0.0

    def _tick(self, s: Service) -> None:
        from gpucluster.sim.simulator import P_SCALE
        if s.ended:
            return
        now = self.sim.kernel.now
        self._account(s, now)
        sp = s.spec
        want = math.ceil(s.last_rate / (sp.replica_rps * sp.target_utilization) - 1e-9)
        want = min(sp.max_replicas, max(sp.min_replicas, want))
        s.history = [(t, n) for t, n in s.history if t > now - STABILISATION_S] + [(now, want)]
        s.replicas = [r for r in s.replicas if r.state in (PENDING, RUNNING)]
        have = len(s.replicas)
        if want > have:
            for _ in range(want - have):
                self._add(s, now)
        else:
            floor = max(n for _, n in s.history)
            self._shrink(s, have - max(want, floor))
        s.peak_replicas = max(s.peak_replicas, len(s.replicas))
        self.sim.kernel.after(sp.autoscale_s, P_SCALE, self._tick, s)

    def _add(self, s: Service, now: float) -> None:
        sp = s.spec
        job = Job(id=self.new_id(), cls=sp.name, kind="replica", gpus=sp.gpus_per_replica, submit=now,
                  work=float("inf"), types=s.types, queue=sp.queue, priority=sp.priority,
                  restart_s=sp.cold_start_s, service=s.index)
        job.seq = job.id
        s.replicas.append(job)
        self.sim.add_job(job)

    def _shrink(self, s: Service, n: int, why: str = "scaled down") -> None:
        # pending replicas go first (newest first), then running ones (newest first)
        order = sorted(s.replicas, key=lambda r: (r.state == RUNNING, -r.submit))
        for r in order[:max(0, n)]:
            if r.state == PENDING:
                self.sim.cancel_pending(r, why)
                r.state = "completed"
            elif r.state == RUNNING:
                self.sim.interrupt(r, why, requeue=False)
        s.replicas = [r for r in s.replicas if r.state in (PENDING, RUNNING)]

    def _end(self, s: Service) -> None:
        self._account(s, self.sim.kernel.now)
        s.ended = True
        self._shrink(s, len(s.replicas), "service ended")

    def finish(self, now: float) -> None:
        for s in self.services:
            if not s.ended:
                self._account(s, now)


@generators.register("inference")
def inference(ctx: Context, w: Any, loc: tuple) -> None:
    where = ctx.loaded.where(*loc)
    types = allowed_types(ctx, w, where)
    end = w.end_hours * 3600.0 if w.end_hours else ctx.horizon_s
    if end is None:
        from gpucluster.errors import UserError
        raise UserError("an inference service needs end_hours or the scenario's horizon_days", **where)
    ctx.services.append(Service(len(ctx.services), w, w.start_hours * 3600.0, end,
                                frozenset(types) if w.gpu_types else None))
