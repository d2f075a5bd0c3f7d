"""Data and video pipelines bound by storage throughput shared on a tier.

A pipeline job reads `data` bytes; its GPUs could consume `rate_per_gpu` bytes/s
each, but the jobs reading one tier share its read bandwidth max-min fairly
(water-filling: nobody gets more than it can use, the rest is split evenly). A
local-NVMe tier is per node (jobs on one node share that node's drives); the
other kinds are one pool for the cluster. Each start or end on a tier changes the
others' rates, so their expected ends are recomputed (O(jobs on that tier)).
Work done is kept when a pipeline is killed (chunks are committed as they finish).
"""

from __future__ import annotations

from typing import Any

from gpucluster.errors import UserError
from gpucluster.sim.distributions import sample
from gpucluster.sim.jobs import Job
from gpucluster.sim.workload import Context, allowed_types, arrival_times, generators
from gpucluster.specs.workload import filled


def water_fill(demands: list[float], capacity: float) -> list[float]:
    """Max-min fair shares of `capacity` for the given demands."""
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    out = [0.0] * len(demands)
    left, n = capacity, len(demands)
    for k, i in enumerate(order):
        share = left / (n - k)
        out[i] = min(demands[i], share)
        left -= out[i]
    return out


class Pipelines:
    def __init__(self, sim: Any, tiers: dict[str, Any]) -> None:
        self.sim = sim
        self.tiers = tiers               # name -> StorageTier spec
        self.groups: dict[tuple, set[int]] = {}

    def _group(self, job: Job) -> tuple:
        tier = self.tiers[filled(job.tier)]      # a pipeline job names its tier
        if tier.kind == "local-nvme":
            return (job.tier, int(self.sim.state.gpu_node[job.placed_alloc[0]]))
        return (job.tier, -1)

    def progress(self, job: Job) -> None:
        """Credit the bytes read since the last rate change."""
        now = self.sim.kernel.now
        dt = now - job.run_start
        if dt > 0 and job.run_speed > 0:
            job.done = min(job.work, job.done + job.run_speed * dt)
            job.useful_gpu_s += job.gpu_share * dt
        job.run_start = now

    def started(self, job: Job) -> None:
        job.extra["group"] = key = self._group(job)
        self.groups.setdefault(key, set()).add(job.id)
        self._rebalance(key)

    def stopped(self, job: Job) -> None:
        key = job.extra.pop("group", None)
        if key is not None and key in self.groups:
            self.groups[key].discard(job.id)
            self._rebalance(key)

    def _rebalance(self, key: tuple) -> None:
        from gpucluster.sim.jobs import RUNNING
        sim = self.sim
        now = sim.kernel.now
        jobs = [sim.running[j] for j in sorted(self.groups[key]) if j in sim.running]
        jobs = [j for j in jobs if j.state == RUNNING]
        cap = self.tiers[key[0]].read_gbps * 1e9
        rates = water_fill([j.gpus * j.rate_per_gpu for j in jobs], cap)
        for job, rate in zip(jobs, rates, strict=True):
            self.progress(job)
            job.run_speed = rate
            end = now + (job.work - job.done) / rate if rate > 0 else float("inf")
            if job.expected_end != end:
                sim.reschedule_end(job, end)


@generators.register("pipeline")
def pipeline(ctx: Context, w: Any, loc: tuple) -> None:
    where = ctx.loaded.where(*loc)
    cluster = ctx.loaded.cluster
    tiers = {t.name: t for t in cluster.storage} if cluster is not None else {}
    if w.tier not in tiers:
        raise UserError(f"no storage tier {w.tier!r} in the cluster (tiers: {', '.join(tiers) or 'none'})",
                        **ctx.loaded.where(*loc, "tier"))
    types = allowed_types(ctx, w, where)
    rng = ctx.rng(f"workload:{w.name}")
    times = arrival_times(w.arrivals, ctx.horizon_s, rng, where)
    gpus = sample(w.gpus, len(times), rng, ctx.loaded.base, where)
    data = sample(w.data_tb, len(times), rng, ctx.loaded.base, where)
    for t, g, d in zip(times.tolist(), gpus.tolist(), data.tolist(), strict=True):
        n = max(1, round(g))
        ctx.new_job(cls=w.name, util=w.gpu_util, kind="pipeline", gpus=n, submit=t, work=d * 1e12, data=d * 1e12, tier=w.tier,
                    rate_per_gpu=w.gbps_per_gpu * 1e9, types=frozenset(types) if w.gpu_types else None,
                    queue=w.queue, priority=w.priority)
