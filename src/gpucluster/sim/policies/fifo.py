"""FIFO: start jobs in arrival order (higher priority first); the first job that
does not fit blocks everything behind it (no backfill)."""

from __future__ import annotations

from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, View


@policies.register("fifo", "first-come-first-served", "fcfs")
class Fifo(Policy):
    name = "fifo"
    summary = "arrival order, head-of-line blocking, no backfill"

    def schedule(self, view: View) -> list[Decision]:
        return self.greedy(view, view.queue, blocking=True)
