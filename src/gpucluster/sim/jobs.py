"""Jobs and the arithmetic of running one: work, speed, checkpoints, restarts.

Four kinds share one record: `training` (a gang: all GPUs or none, checkpoints,
restart from the last checkpoint), `batch` (one task of an embarrassingly parallel
array; reruns from scratch), `replica` (one replica of an inference service; runs
until the autoscaler or the service's end stops it) and `pipeline` (a data/video
job whose speed is set by the storage tier it shares, see pipelines.py). Jobs read
from traces are `training` or `batch` jobs with a given duration.

Work is measured in seconds on the job's reference GPU type; on another type it
runs at `speeds[type]` times that pace (heterogeneity), and a gang spread over more
leaf switches than it needs runs `slowdown` times slower.

Checkpoints are not events: with interval tau (work seconds) and write time delta,
a segment's wall time and the work saved when it is cut short follow in closed
form (`segment_wall`, `saved_at`), so a 90-day run costs no per-checkpoint events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

PENDING, RUNNING, COMPLETED, FAILED, CANCELLED = "pending", "running", "completed", "failed", "cancelled"
KINDS = ("training", "batch", "replica", "pipeline")
INF = float("inf")


@dataclass(eq=False, slots=True)
class Job:
    id: int
    cls: str                       # workload class (generator or trace name): metrics group by it
    kind: str
    gpus: int                      # GPUs (a GPU-sharing pod: 1 with milli < 1000)
    submit: float
    work: float                    # seconds on the reference type (INF: runs until stopped)
    milli: int = 1000              # share of each GPU, thousandths
    cpu_milli: int = 0
    mem_mib: int = 0
    types: frozenset[str] | None = None        # allowed GPU types; None = any
    speeds: dict[str, float] | None = None     # pace per type relative to the reference (default 1)
    queue: str = "default"
    priority: int = 0
    ckpt_interval: float = 0.0     # work seconds between checkpoints; 0 = none
    ckpt_write: float = 0.0        # wall seconds to write one
    restart_s: float = 0.0         # wall seconds to reload after a restart
    max_retries: int = 1_000_000   # restarts allowed before the job counts as failed
    service: int | None = None     # replica: index of its service
    data: float = 0.0              # pipeline: bytes to read
    tier: str | None = None        # pipeline: storage tier
    rate_per_gpu: float = 0.0      # pipeline: bytes/s one GPU can consume
    # -- what a Slurm history (sacct) says about the job; empty for generated jobs --------
    time_limit_s: float | None = None  # wall seconds per run: killed at it (TIMEOUT); None = unlimited
    partition: str = ""
    qos: str = ""
    account: str = ""
    recorded_wait_s: float | None = None  # the wait the real cluster recorded (Start - Eligible)
    # -- progress and outcome -----------------------------------------------------
    state: str = PENDING
    done: float = 0.0              # work saved (checkpointed) so far
    attained: float = 0.0          # GPU-seconds received so far (LAS)
    first_start: float | None = None
    end: float | None = None
    run_start: float = 0.0         # start of the current segment
    run_speed: float = 1.0         # work seconds per wall second in this segment
    run_restart: float = 0.0       # restart overhead paid at the start of this segment
    expected_end: float = INF
    alloc: np.ndarray | None = None
    gpu_type: str | None = None
    leaves: int = 0
    restarts: int = 0
    preemptions: int = 0
    reason: str = ""
    seq: int = 0                   # submission order (ties)
    token: int | None = None       # completion event
    # GPU-seconds by use
    useful_gpu_s: float = 0.0
    ckpt_gpu_s: float = 0.0
    restart_gpu_s: float = 0.0     # reloading after a failure
    move_restart_gpu_s: float = 0.0  # reloading after a preemption: a round-based move, time-slicing, a reclaim
    last_interrupt: str = ""       # why the job last stopped early ("failure", "preempted", ...)
    ran_s: float = 0.0             # wall seconds spent running, all segments (time queued = the rest)
    lost_gpu_s: float = 0.0        # work lost to failures (since the last checkpoint)
    preempt_lost_gpu_s: float = 0.0  # work lost to preemptions and spot reclaims
    util: float = 1.0              # fraction of its GPU time the job keeps the GPUs computing
    extra: dict = field(default_factory=dict)

    @property
    def gpu_share(self) -> float:
        """GPUs held, counting a shared GPU as its fraction."""
        return self.gpus * self.milli / 1000

    # A running job's placement, typed as set: alloc and gpu_type are None while the job waits,
    # so reading them for a job that is not placed is a bug, and says so.
    @property
    def placed_alloc(self) -> np.ndarray:
        if self.alloc is None:
            raise RuntimeError(f"job {self.id} is not placed (state {self.state})")
        return self.alloc

    @property
    def placed_type(self) -> str:
        if self.gpu_type is None:
            raise RuntimeError(f"job {self.id} is not placed (state {self.state})")
        return self.gpu_type

    def speed_on(self, gpu_type: str) -> float:
        return self.speeds.get(gpu_type, 0.0) if self.speeds else 1.0

    def remaining(self) -> float:
        return self.work - self.done

    def est_duration(self, gpu_type: str | None = None) -> float:
        """Expected wall time from now if started on `gpu_type` (best type if None)."""
        if self.speeds:
            v = self.speeds.get(gpu_type, 0.0) if gpu_type else max(self.speeds.values())
        else:
            v = 1.0
        if v <= 0:
            return INF
        return segment_wall(self.done, self.work, v, self.ckpt_interval, self.ckpt_write,
                            self.restart_s if self.done > 0 or self.restarts else 0.0)


def checkpoints_between(done: float, work: float, tau: float) -> int:
    """Checkpoints written at work positions k*tau with done < k*tau < work."""
    if tau <= 0 or work == INF:
        return 0
    return max(0, math.ceil(work / tau - 1e-12) - 1 - math.floor(done / tau + 1e-12))


def segment_wall(done: float, work: float, speed: float, tau: float, delta: float, restart: float) -> float:
    """Wall seconds to go from `done` to `work` at `speed`, writing checkpoints on the way."""
    if work == INF:
        return INF
    return restart + (work - done) / speed + checkpoints_between(done, work, tau) * delta


@dataclass(frozen=True)
class SegmentSplit:
    saved: float        # work position of the last completed checkpoint (or `done`)
    useful_s: float     # wall seconds of work that was saved
    ckpt_s: float       # wall seconds spent writing checkpoints
    restart_s: float    # wall seconds reloading
    lost_s: float       # wall seconds of work after the last checkpoint (lost)


def saved_at(done: float, work: float, speed: float, tau: float, delta: float, restart: float,
             elapsed: float, keep_all: bool = False) -> SegmentSplit:
    """Split `elapsed` wall seconds of a segment that is cut short.

    `keep_all` (a preemption that checkpoints on the way out, as Tiresias does, or a
    pipeline whose chunks are committed as they finish) keeps all work done."""
    split = _split(done, work, speed, tau, delta, restart, elapsed)
    if keep_all and split.lost_s > 0:
        gained = split.lost_s * speed
        if work != INF:
            gained = min(gained, work - split.saved)
        return SegmentSplit(split.saved + gained, split.useful_s + split.lost_s, split.ckpt_s, split.restart_s, 0.0)
    return split


def _split(done: float, work: float, speed: float, tau: float, delta: float, restart: float,
           elapsed: float) -> SegmentSplit:
    r = min(elapsed, restart)
    x = elapsed - r
    if x <= 0 or tau <= 0:
        return SegmentSplit(done, 0.0, 0.0, r, max(0.0, x))
    n_max = checkpoints_between(done, work, tau)
    first = (math.floor(done / tau + 1e-12) + 1) * tau      # work position of the next checkpoint
    t1 = (first - done) / speed                              # wall time to reach it
    k = 0
    if n_max and x >= t1 + delta:
        k = min(n_max, 1 + int((x - t1 - delta) // (tau / speed + delta)))
    last = first + (k - 1) * tau if k else done
    useful = (last - done) / speed
    rest = x - useful - k * delta
    partial = 0.0
    if k < n_max:  # cut inside a period: work up to the next checkpoint, then (part of) its write
        to_next = (first - done) / speed if k == 0 else tau / speed
        partial = min(delta, max(0.0, rest - to_next))
    return SegmentSplit(last, useful, k * delta + partial, r, rest - partial)
