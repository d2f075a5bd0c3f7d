"""Heterogeneity-aware routing: each job goes to the GPU type with the best throughput
per dollar that fits now (a greedy form of Gavel's "cost" objective, Narayanan et al.
OSDI'20), under EASY backfill. Gavel's own round-based LP policies are `sim/rounds/`
(max_min_fairness_perf, fifo_perf, ...); this one keeps no alias "gavel" so the two are
not confused. Throughput on a type is the job's speed there
(from the training planner, or dense bf16 peak as an estimate); the price is the
pool's rental price per GPU-hour (the cluster spec's, else the catalog's). The
agnostic policies take types in the cluster's pool order."""

from __future__ import annotations

from typing import Any

from gpucluster.sim.jobs import Job
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.backfill import EasyBackfill
from gpucluster.sim.policies.base import View


@policies.register("hetero", "heterogeneity-aware")
class HeterogeneityAware(EasyBackfill):
    name = "hetero"
    summary = "EASY backfill that routes each job to the GPU type with the best throughput per dollar"

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        self.prices: dict[str, float] = {}

    def prepare(self, sim: Any) -> None:
        self.prices = dict(getattr(sim, "prices", {}))

    def types_order(self, view: View, job: Job) -> list[str | None]:
        types = view.types_for(job)
        if len(types) <= 1 or types[0] is None:
            return types
        named = [t for t in types if t is not None]     # more than one type: all named
        return [*sorted(named, key=lambda t: -job.speed_on(t) / self.prices.get(t, 1.0))]
