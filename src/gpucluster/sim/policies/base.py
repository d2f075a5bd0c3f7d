"""What every scheduling policy sees and returns.

A policy is one small class whose `schedule(view)` is a pure call in the spirit of
Ray's autoscaler v2: it reads a `View` of the cluster (free GPUs, the queue in the
policy's order, running jobs) and returns decisions (`Start`, `Preempt`,
`Reject`); the simulator checks and applies them. Policies never change the state:
tentative placements go to a `Scratch` copy. A policy may memoise values keyed
on the view (EASY's reservation), never on anything else.

Queue order is the policy's `key(job)`, fixed while the job waits (the simulator
keeps the queue sorted by it, so a pass reads it in order without sorting).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gpucluster.sim.jobs import Job
from gpucluster.sim.placement import Scratch, place_share, place_whole
from gpucluster.sim.state import WHOLE, ClusterState

if TYPE_CHECKING:
    from gpucluster.sim.queue import JobQueue


@dataclass(frozen=True, slots=True)
class Start:
    job: Job
    gpus: np.ndarray


@dataclass(frozen=True, slots=True)
class Preempt:
    job: Job
    save: bool = False      # checkpoint on the way out (keeps all work) instead of losing it since the last one


@dataclass(frozen=True, slots=True)
class Reject:
    job: Job
    reason: str


Decision = Start | Preempt | Reject


@dataclass
class View:
    now: float
    state: ClusterState
    queue: JobQueue | list[Job]      # waiting jobs in the policy's order
    running: dict[int, Job]
    full: bool                       # something was freed (or a tick) since the last pass: look at every job
    new: set[int]                    # ids of jobs queued since the last pass
    epoch: int                       # bumped when running jobs end off-schedule or capacity changes
    quotas: dict[str, Any] = field(default_factory=dict)     # queue name -> spec Queue
    running_table: Any = None        # RunningTable: expected ends per GPU type (numpy)
    frag: Any = None                 # fragmentation model (fgd)
    type_masks: dict = field(default_factory=dict)
    queue_usage: dict[str, float] = field(default_factory=dict)   # GPUs held by running jobs, per queue

    def mask(self, gpu_type: str | None) -> np.ndarray | None:
        if gpu_type is None or len(self.state.types) == 1:
            return None
        m = self.type_masks.get(gpu_type)
        if m is None:
            m = self.type_masks[gpu_type] = self.state.node_type == self.state.type_index[gpu_type]
        return m

    def types_for(self, job: Job) -> list[str | None]:
        """GPU types the job may run on, in the cluster's pool order (None = the only type)."""
        types = self.state.types
        if len(types) == 1:
            ok = (job.types is None or types[0] in job.types) and (not job.speeds or job.speed_on(types[0]) > 0)
            return [None] if ok else []
        out: list[str | None] = []
        for pool_type in self.state.pool_types:
            if (job.types is None or pool_type in job.types) and (not job.speeds or job.speed_on(pool_type) > 0):
                out.append(pool_type)
        return out


class Policy:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    placement: ClassVar[str] = "pack"          # whole-GPU strategy (see placement.py)
    share_placement: ClassVar[str] = "best-fit"
    tick_s: float | None = None                 # ask for a full pass every tick_s seconds
    options_doc: ClassVar[dict[str, str]] = {}

    def __init__(self, options: dict[str, Any] | None = None, queues: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self.queues = dict(queues or {})
        unknown = set(self.options) - set(self.options_doc)
        if unknown:
            from gpucluster.errors import UserError
            valid = ", ".join(sorted(self.options_doc)) or "none"
            raise UserError(f"policy {self.name} has no option {min(unknown)!r} (valid: {valid})",
                            field="policy_options")

    def key(self, job: Job) -> tuple:
        """Queue order: higher priority first, then submission order."""
        return (-job.priority, job.submit, job.seq)

    def schedule(self, view: View) -> list[Decision]:
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------
    def types_order(self, view: View, job: Job) -> list[str | None]:
        return view.types_for(job)

    def place(self, view: View, scr: Scratch, job: Job, extra_mask: np.ndarray | None = None,
              gpu_type: str | None = None) -> np.ndarray | None:
        types = [gpu_type] if gpu_type is not None else self.types_order(view, job)
        for t in types:
            mask = view.mask(t)
            if extra_mask is not None:
                mask = extra_mask if mask is None else mask & extra_mask
            if job.milli < WHOLE:
                g = place_share(scr, job.milli, mask, job.cpu_milli, job.mem_mib, self.share_placement, view.frag)
            else:
                g = place_whole(scr, job.gpus, mask, self.placement, job.cpu_milli, job.mem_mib, view.frag)
            if g is not None:
                return g
        return None

    def greedy(self, view: View, jobs, *, blocking: bool, scr: Scratch | None = None,
               limit: int | None = None, extra_mask=None) -> list[Decision]:
        """Start jobs in the given order while they fit; `blocking` stops at the first that
        does not (FIFO), else skips it. Sizes that failed are remembered for the pass: a
        larger gang of the same shape cannot fit either."""
        scr = scr or Scratch(view.state)
        out: list[Decision] = []
        failed: dict[tuple, int] = {}
        for n, job in enumerate(jobs):
            if limit is not None and n >= limit:
                break
            shape = (job.types, job.milli)
            if not job.cpu_milli and failed.get(shape, 1 << 62) <= job.gpus:
                if blocking:
                    break
                continue
            g = self.place(view, scr, job, extra_mask)
            if g is None:
                if not job.cpu_milli:
                    failed[shape] = min(failed.get(shape, 1 << 62), job.gpus)
                if blocking:
                    break
                continue
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        return out
