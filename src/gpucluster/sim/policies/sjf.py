"""Shortest job first: the queue ordered by expected run time on the job's fastest
GPU type; any job that fits starts (no reservation, so long jobs can starve),
as in the SJF baseline of the Alibaba PAI simulator (Weng et al. NSDI'22)."""

from __future__ import annotations

from typing import ClassVar

from gpucluster.sim.jobs import Job
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, View


@policies.register("sjf", "shortest-job-first")
class ShortestJobFirst(Policy):
    name = "sjf"
    summary = "shortest expected run time first, non-preemptive, skips jobs that do not fit"
    options_doc: ClassVar[dict[str, str]] = {"depth": "jobs examined per pass (default 1000)"}

    def key(self, job: Job) -> tuple:
        return (-job.priority, job.est_duration(), job.submit, job.seq)

    def schedule(self, view: View) -> list[Decision]:
        depth = int(self.options.get("depth", 1000))
        jobs = view.queue[:depth]
        if not view.full:  # nothing was freed: only the new arrivals can possibly start
            jobs = [j for j in jobs if j.id in view.new]
        return self.greedy(view, jobs, blocking=False)
