"""What a run measured: utilisation over time, queueing, completion, failures, cost.

Definitions (all GPU quantities count a shared GPU by its fraction):
* allocation = GPU-time held by jobs / capacity GPU-time (capacity: powered-on GPUs,
  so cloud-burst nodes count while rented); busy = GPU-time computing / capacity,
  where computing is the jobs' useful and later-lost work times their `gpu_util`,
  plus inference replicas weighted by their load (served / capacity).
* goodput = useful GPU-time (work that survived: checkpointed or completed) /
  allocated GPU-time. The rest went to checkpoint writes, restarts (reload) and
  work lost to failures or preemptions.
* fragmentation (sampled): free GPUs that no waiting job could use (a gang too big
  for the free nodes of its type, a share too big for any GPU's free part), while
  jobs wait.
* wait = first start - submit (time to first start); queued = the job's whole time in the
  queue, submit to end (or the run's end) less its time running. They differ under
  time-sharing and preemption (round-based policies, LAS): a job that starts at once and
  is then preempted for days has a short wait and a long time queued.
  JCT = end - submit (completed jobs only).
* restarts: GPU time reloading after a failure (`restart`) and after a preemption, a
  round-based move or a spot reclaim (`restart_preemption`), apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.sim.jobs import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING, Job
from gpucluster.sim.state import WHOLE


class Recorder:
    """Change points of allocation, busy, down, capacity and queue length (after each pass),
    and sampled fragmentation."""

    def __init__(self, sim: Any, samples: int) -> None:
        self.sim, self.samples = sim, samples
        self.t: list[float] = []
        self.rows: list[tuple[float, float, float, float, int]] = []
        self.frag_t: list[float] = []
        self.frag: list[float] = []
        self.frag_waiting: list[bool] = []
        self.idle_steps: list[tuple[float, float]] = []   # (time, change of held-but-not-computing GPUs)
        self.interval = 0.0
        sim.hooks_pass.append(self.record)

    def begin(self, end: float) -> None:
        from gpucluster.sim.simulator import P_SAMPLE
        span = end if end < 10 * 365 * 86400 else max((j.submit for j in self.sim.jobs), default=86400.0) * 1.5
        self.interval = max(span, 3600.0) / self.samples
        self.sim.kernel.at(0.0, P_SAMPLE, self._sample)
        self.record()

    def record(self) -> None:
        sim = self.sim
        st = sim.state
        row = (st.alloc_milli / WHOLE, max(0.0, sim.busy_rate), float(st.down_gpus), float(st.capacity), len(sim.queue))
        now = sim.kernel.now
        if self.t and self.t[-1] == now:
            self.rows[-1] = row
        elif not self.rows or self.rows[-1] != row:
            self.t.append(now)
            self.rows.append(row)

    def not_busy(self, start: float, restart_s: float, ckpt_s: float, end: float, gpus: float) -> None:
        """A segment [start, end] of a job holding `gpus` (x its util): reloading for `restart_s`
        at its start, then writing checkpoints for `ckpt_s` in all, spread evenly over the rest."""
        steps = self.idle_steps
        if restart_s > 0:
            steps += [(start, gpus), (start + restart_s, -gpus)]
        rest = end - start - restart_s
        if ckpt_s > 0 and rest > 0:
            rate = gpus * min(1.0, ckpt_s / rest)
            steps += [(start + restart_s, rate), (end, -rate)]

    def _sample(self, _: Any) -> None:
        from gpucluster.sim.simulator import P_SAMPLE
        sim = self.sim
        self.frag_t.append(sim.kernel.now)
        waiting = bool(sim.queue)
        self.frag_waiting.append(waiting)
        self.frag.append(fragmented_gpus(sim) if waiting else 0.0)
        if not sim._done():
            sim.kernel.after(self.interval, P_SAMPLE, self._sample)

    def series(self, end: float, points: int) -> dict[str, list[float]]:
        """Bucket averages of the step functions over [0, end]."""
        if not self.t or end <= 0:
            return {}
        t = np.asarray(self.t + [end])
        v = np.asarray(self.rows, dtype=float)
        edges = np.linspace(0.0, end, points + 1)
        dt = np.diff(t)
        cum = np.vstack([np.zeros(v.shape[1]), np.cumsum(v * dt[:, None], axis=0)])
        at = np.stack([np.interp(edges, t, cum[:, k]) for k in range(v.shape[1])], axis=1)
        avg = np.diff(at, axis=0) / np.diff(edges)[:, None]
        if self.idle_steps:   # reloads and checkpoint writes hold GPUs without computing: not busy
            st = np.array(sorted(self.idle_steps))
            ts, level = st[:, 0], np.cumsum(st[:, 1])
            cum_idle = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(ts))])
            idle_at = np.interp(edges, ts, cum_idle, left=0.0, right=cum_idle[-1])
            avg[:, 1] = np.maximum(0.0, avg[:, 1] - np.diff(idle_at) / np.diff(edges))
        cap = np.where(avg[:, 3] > 0, avg[:, 3], np.nan)
        return {"t_hours": (edges[1:] / 3600).round(3).tolist(),
                "allocation": np.nan_to_num(avg[:, 0] / cap).round(4).tolist(),
                "busy": np.nan_to_num(avg[:, 1] / cap).round(4).tolist(),
                "down": np.nan_to_num(avg[:, 2] / cap).round(4).tolist(),
                "capacity_gpus": avg[:, 3].round(2).tolist(),
                "queued_jobs": avg[:, 4].round(2).tolist()}


def fragmented_gpus(sim: Any, look: int = 100) -> float:
    """Free GPUs (shares count) on usable nodes that none of the first `look` waiting jobs can use."""
    st = sim.state
    free = np.where(st.usable[st.gpu_node], st.gpu_free, 0)
    total = free.sum() / WHOLE
    if total <= 0:
        return 0.0
    usable_gpu = np.zeros(st.total_gpus, dtype=bool)
    seen: set[tuple] = set()
    for n, job in enumerate(sim.queue):
        if n >= look:
            break
        shape = (job.gpus, job.milli, job.types)
        if shape in seen:
            continue
        seen.add(shape)
        for t in sim._types_of(job):
            tmask = st.node_type == st.type_index[t]
            if job.milli < WHOLE:
                usable_gpu |= (free >= job.milli) & tmask[st.gpu_node]
                continue
            nodes_ok = tmask & (st.avail > 0)
            if job.gpus <= int(st.node_gpus[tmask].max()):
                nodes_ok &= st.avail >= job.gpus
            elif int(st.avail[tmask].sum()) < job.gpus:
                continue
            usable_gpu |= nodes_ok[st.gpu_node] & (free == WHOLE)
    return float(total - free[usable_gpu].sum() / WHOLE)


def stats(x: list[float]) -> dict[str, float | None]:
    if not x:
        return {"mean": None, "p50": None, "p99": None}
    a = np.asarray(x, dtype=float)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99))}


def job_classes(jobs: list[Job], end: float = 0.0) -> dict[str, dict[str, Any]]:
    """Per class: counts, waits, JCT, GPU time; `end`: the run's end (jobs not ended queue up to it)."""
    by: dict[str, list[Job]] = {}
    for j in jobs:
        by.setdefault(j.cls, []).append(j)
    out = {}
    for name, js in by.items():
        done = [j for j in js if j.state == COMPLETED and j.kind != "replica"]
        started = [j for j in js if j.first_start is not None]
        out[name] = {
            "kind": js[0].kind, "jobs": len(js),
            "completed": sum(j.state == COMPLETED for j in js), "failed": sum(j.state == FAILED for j in js),
            "cancelled": sum(j.state == CANCELLED for j in js), "running": sum(j.state == RUNNING for j in js),
            "pending": sum(j.state == PENDING for j in js),
            "wait_s": stats([j.first_start - j.submit for j in started if j.first_start is not None]),
            "queued_s": stats([(j.end if j.end is not None else end) - j.submit - j.ran_s for j in started]),
            "jct_s": stats([j.end - j.submit for j in done if j.end is not None]),   # completed: all ended
            "gpu_hours": sum(_alloc_s(j) for j in js) / 3600,
            "restarts": sum(j.restarts for j in js), "preemptions": sum(j.preemptions for j in js),
            "restart_gpu_hours": sum(j.restart_gpu_s for j in js) / 3600,
            "restart_preemption_gpu_hours": sum(j.move_restart_gpu_s for j in js) / 3600,
        }
    return out


def _alloc_s(j: Job) -> float:
    return (j.useful_gpu_s + j.ckpt_gpu_s + j.restart_gpu_s + j.move_restart_gpu_s + j.lost_gpu_s
            + j.preempt_lost_gpu_s)


def gpu_time(jobs: list[Job]) -> dict[str, float]:
    """GPU-seconds by use, summed over jobs (their sum is the allocated GPU-time)."""
    return {"useful": sum(j.useful_gpu_s for j in jobs), "checkpoint": sum(j.ckpt_gpu_s for j in jobs),
            "restart": sum(j.restart_gpu_s for j in jobs),
            "restart_preemption": sum(j.move_restart_gpu_s for j in jobs),
            "lost_failures": sum(j.lost_gpu_s for j in jobs),
            "lost_preemption": sum(j.preempt_lost_gpu_s for j in jobs),
            "busy": sum((j.useful_gpu_s + j.lost_gpu_s + j.preempt_lost_gpu_s) * j.util
                        for j in jobs if j.kind != "replica"),
            # work done in GPU-seconds of the jobs' reference GPU type (a faster type does the same
            # work in fewer GPU-hours); replicas and pipelines count their useful GPU time
            "work": sum(j.gpu_share * j.done if j.kind in ("training", "batch") else j.useful_gpu_s
                        for j in jobs)}
