"""The cluster simulator: jobs arrive, a policy places them, they run, end or are killed.

Event priorities at equal times (lower first): job ends, then failures and repairs,
then arrivals and autoscaling, then one scheduling pass that sees all of them,
then the sampler. A pass is requested by any change and runs once per instant.

Every decision a policy returns is checked by the state (no GPU twice, never
beyond capacity, only usable nodes); a bad decision raises AllocationError: a
bug, not a user error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpucluster.sim.jobs import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INF,
    PENDING,
    RUNNING,
    Job,
    checkpoints_between,
    saved_at,
    segment_wall,
)
from gpucluster.sim.kernel import Kernel
from gpucluster.sim.placement import leaves_used
from gpucluster.sim.policies.base import Policy, Preempt, Reject, Start, View
from gpucluster.sim.queue import JobQueue
from gpucluster.sim.running import RunningTable
from gpucluster.sim.state import ClusterState

if TYPE_CHECKING:
    from gpucluster.sim.burst import Burst
    from gpucluster.sim.failures import FailureProcess
    from gpucluster.sim.metrics import Recorder
    from gpucluster.sim.pipelines import Pipelines
    from gpucluster.sim.services import Autoscaler

P_END, P_FAIL, P_REPAIR, P_ARRIVE, P_SCALE, P_BURST, P_PASS, P_SAMPLE = range(8)
PROGRESS_EVERY_S = 0.25   # wall seconds between progress reports from passes


@dataclass
class SimConfig:
    horizon_s: float | None = None      # None: until every job has ended
    max_s: float = 3650 * 86400.0
    spread_slowdown: float = 0.05
    samples: int = 200
    quotas: dict[str, Any] = field(default_factory=dict)


class Simulation:
    def __init__(self, state: ClusterState, jobs: list[Job], policy: Policy, kernel: Kernel,
                 config: SimConfig, log: Callable[[dict], None] | None = None) -> None:
        self.state, self.policy, self.kernel, self.cfg, self.log = state, policy, kernel, config, log
        self.jobs = sorted(jobs, key=lambda j: (j.submit, j.seq))
        self.by_id: dict[int, Job] = {j.id: j for j in self.jobs}
        self.queue = JobQueue(policy.key)
        self.running: dict[int, Job] = {}
        self.table = RunningTable()
        self.busy_rate = 0.0            # GPUs computing now (allocated x the jobs' gpu_util)
        self.queue_usage: dict[str, float] = {}   # GPUs held per queue (Kueue quotas)
        self.epoch = 0
        self._full = True
        self._new: set[int] = set()
        self._pass_token: int | None = None
        self._next_arrival = 0
        self.finished = 0
        self.hooks_start: list[Callable[[Job], None]] = []     # services, pipelines, burst listen
        self.hooks_stop: list[Callable[[Job, str], None]] = []
        self.hooks_pass: list[Callable[[], None]] = []
        self.frag = None
        self.type_masks: dict = {}
        self.services: list = []
        self.autoscaler: Autoscaler | None = None
        self.notes: list[str] = []
        self.trace_reports: list[dict] = []
        self.pipelines: Pipelines | None = None
        self.failures: FailureProcess | None = None
        self.burst: Burst | None = None
        self.partial = False
        self.end_time = 0.0
        self.rejected: list[Job] = []
        self.recorder: Recorder | None = None
        self.prices: dict[str, float] = {}              # USD per GPU-hour by type (set by run.build)
        self.warnings: list[dict[str, Any]] = []        # jobs that can never run (set by run.build)
        self._finished_cleanly = False

    # -- arrivals -----------------------------------------------------------------
    def _schedule_arrival(self) -> None:
        if self._next_arrival < len(self.jobs):
            self.kernel.at(self.jobs[self._next_arrival].submit, P_ARRIVE, self._on_arrival)

    def _on_arrival(self, _: Any) -> None:
        now = self.kernel.now
        jobs, i = self.jobs, self._next_arrival
        while i < len(jobs) and jobs[i].submit <= now:
            self.submit(jobs[i])
            i += 1
        self._next_arrival = i
        self._schedule_arrival()

    def add_job(self, job: Job) -> None:
        """A job created during the run (an inference replica): registered and queued now."""
        self.by_id[job.id] = job
        self.submit(job)

    def submit(self, job: Job) -> None:
        why = self.cannot_ever_run(job)
        if why:
            job.state, job.end, job.reason = CANCELLED, self.kernel.now, why
            self.rejected.append(job)
            self.finished += 1
            self._emit("reject", job, reason=why)
            return
        self._enqueue(job)
        self._emit("submit", job)

    def _enqueue(self, job: Job) -> None:
        job.state = PENDING
        self.queue.push(job)
        self._new.add(job.id)
        self.request_pass()
        if self.burst is not None:
            self.burst.on_queued(job)

    def cannot_ever_run(self, job: Job) -> str:
        st = self.state
        cap = 0
        for t in self._types_of(job):
            nodes = st.node_type == st.type_index[t]
            if job.cpu_milli or job.mem_mib:  # only nodes big enough for its CPU and memory
                nodes = nodes & ((st.cpu_cap == 0) | (st.cpu_cap >= job.cpu_milli)) & (
                    (st.mem_cap == 0) | (st.mem_cap >= job.mem_mib))
                if job.gpus > 1 or job.milli >= 1000:
                    nodes = nodes & (st.node_gpus >= job.gpus)   # CPU and memory come from one node
            per_node = int(st.node_gpus[nodes].max()) if nodes.any() else 0
            if job.milli < 1000:
                cap = max(cap, 1 if per_node else 0)
            else:
                cap = max(cap, int(st.node_gpus[nodes].sum()))
        if cap == 0:
            return "no GPU type of the cluster can run it"
        if job.gpus > cap:
            return f"asks for {job.gpus} GPUs, more than the cluster has of its types ({cap})"
        return ""

    def _types_of(self, job: Job) -> list[str]:
        return [t for t in self.state.pool_types if (job.types is None or t in job.types)
                and (not job.speeds or job.speed_on(t) > 0)]

    # -- scheduling passes --------------------------------------------------------
    def request_pass(self, full: bool = False) -> None:
        if full:
            self._full = True
        if self._pass_token is None:
            self._pass_token = self.kernel.at(self.kernel.now, P_PASS, self._on_pass)

    def _on_pass(self, _: Any) -> None:
        self._pass_token = None
        if self.queue or self.policy.tick_s:
            view = View(self.kernel.now, self.state, self.queue, self.running, self._full, self._new, self.epoch,
                        self.cfg.quotas, self.table, self.frag, self.type_masks, self.queue_usage)
            self._full = False
            self._new = set()
            for d in self.policy.schedule(view):
                if isinstance(d, Start):
                    if d.job.state == PENDING:
                        self.start(d.job, d.gpus)
                elif isinstance(d, Preempt):
                    if d.job.state == RUNNING:
                        self.interrupt(d.job, "preempted", save=d.save)
                elif isinstance(d, Reject) and d.job.state == PENDING:
                    d.job.state, d.job.end, d.job.reason = CANCELLED, self.kernel.now, d.reason
                    self.queue.removed(d.job)
                    self.rejected.append(d.job)
                    self.finished += 1
                    self._emit("reject", d.job, reason=d.reason)
        else:
            self._full = False
            self._new = set()
        for hook in self.hooks_pass:
            hook()

    def _on_tick(self, _: Any) -> None:
        self.request_pass(full=True)
        tick = self.policy.tick_s     # set: a tick is only scheduled for a policy that has one
        if tick and not self._done():
            self.kernel.after(tick, P_PASS - 1, self._on_tick)

    # -- running jobs -------------------------------------------------------------
    def start(self, job: Job, gpus: np.ndarray) -> None:
        st, now = self.state, self.kernel.now
        st.advance(now)
        st.allocate(job.id, gpus, job.milli, job.cpu_milli, job.mem_mib)
        self.queue.removed(job)
        job.state, job.alloc, job.run_start = RUNNING, gpus, now
        job.gpu_type = st.types[st.node_type[st.gpu_node[gpus[0]]]]
        slow = 1.0
        if job.gpus > 1 and job.milli >= 1000:
            used, need = leaves_used(st, gpus)
            job.leaves = used
            slow = 1.0 + self.cfg.spread_slowdown * (used - need)
        job.run_speed = job.speed_on(job.gpu_type) / slow
        resumed = job.done > 0 or job.restarts > 0 or job.preemptions > 0 or job.kind == "replica"
        job.run_restart = job.restart_s if resumed else 0.0
        if job.first_start is None:
            job.first_start = now
        self.running[job.id] = job
        self.busy_rate += job.gpu_share * job.util
        self.queue_usage[job.queue] = self.queue_usage.get(job.queue, 0.0) + job.gpu_share
        if job.kind == "pipeline" and self.pipelines is not None:
            job.expected_end = INF
            self.table.add(job.id, INF, job.gpu_share, int(st.type_index[job.gpu_type]))
            self.pipelines.started(job)   # sets its rate and end
        else:
            wall = segment_wall(job.done, job.work, job.run_speed, job.ckpt_interval, job.ckpt_write,
                                job.run_restart)
            limit = job.time_limit_s
            if limit is not None and wall > limit:   # Slurm kills it at its time limit (TIMEOUT)
                job.expected_end = now + limit
                job.token = self.kernel.at(job.expected_end, P_END, self._on_timeout, job)
            else:
                job.expected_end = now + wall
                if wall < INF:
                    job.token = self.kernel.at(job.expected_end, P_END, self._on_end, job)
            self.table.add(job.id, job.expected_end, job.gpu_share, int(st.type_index[job.gpu_type]))
        for hook in self.hooks_start:
            hook(job)
        self._emit("start", job, gpus=len(gpus), gpu_type=job.gpu_type, nodes=len(np.unique(st.gpu_node[gpus])))

    def _on_end(self, job: Job) -> None:
        if job.state != RUNNING:
            return
        share = job.gpu_share
        if job.kind == "pipeline" and self.pipelines is not None:
            self.pipelines.progress(job)
        else:
            n_ck = checkpoints_between(job.done, job.work, job.ckpt_interval)
            job.useful_gpu_s += share * (job.work - job.done) / job.run_speed
            self._credit_overheads(job, n_ck * job.ckpt_write, job.run_restart)
        job.attained += job.gpus * (self.kernel.now - job.run_start)
        job.done = job.work
        final = job.extra.get("final_state", COMPLETED)   # a replayed job ends as its history says (sacct)
        if final != COMPLETED and not job.reason:
            job.reason = f"recorded {job.extra.get('slurm_state', final)}"
        self._stop(job, final, "end", on_schedule=True)

    def _on_timeout(self, job: Job) -> None:
        if job.state == RUNNING:
            job.reason = job.reason or "timeout: reached its time limit"
            self.interrupt(job, "timeout", requeue=False)

    def interrupt(self, job: Job, why: str, save: bool = False, requeue: bool = True) -> None:
        """Cut a running job short: a failure, a preemption, a scale-down, the horizon."""
        now = self.kernel.now
        elapsed = now - job.run_start
        share = job.gpu_share
        if job.kind == "pipeline" and self.pipelines is not None:
            self.pipelines.progress(job)
            elapsed = 0.0
        keep = save or job.kind == "replica"
        sp = saved_at(job.done, job.work, job.run_speed, job.ckpt_interval, job.ckpt_write, job.run_restart,
                      elapsed, keep_all=keep)
        job.useful_gpu_s += share * sp.useful_s
        self._credit_overheads(job, sp.ckpt_s, sp.restart_s)
        job.last_interrupt = why
        if why == "failure":
            job.lost_gpu_s += share * sp.lost_s
        else:
            job.preempt_lost_gpu_s += share * sp.lost_s
        job.attained += job.gpus * elapsed
        job.done = sp.saved
        self.kernel.cancel(job.token)
        if why == "failure":
            job.restarts += 1
        elif why == "preempted":
            job.preemptions += 1
        if not requeue:
            self._stop(job, COMPLETED if why in ("scaled down", "service ended")
                       else FAILED if why == "timeout" else CANCELLED, why)
        elif why == "failure" and job.restarts > job.max_retries:
            job.reason = f"failed {job.restarts} times"
            self._stop(job, FAILED, why)
        else:
            self._stop(job, PENDING, why)
            self._enqueue(job)

    def _stop(self, job: Job, state: str, why: str, on_schedule: bool = False) -> None:
        st, now = self.state, self.kernel.now
        st.advance(now)
        st.release(job.id, job.placed_alloc, job.milli, job.cpu_milli, job.mem_mib)
        del self.running[job.id]
        job.ran_s += now - job.run_start
        self.busy_rate -= job.gpu_share * job.util
        self.queue_usage[job.queue] -= job.gpu_share
        self.table.remove(job.id)
        if not on_schedule:
            self.epoch += 1
        if job.kind == "pipeline" and self.pipelines is not None:
            self.pipelines.stopped(job)
        job.state, job.token = state, None
        if state != PENDING:
            job.end = now
            job.alloc = None
            self.finished += 1
            if not job.reason and state != COMPLETED:
                job.reason = why
        self._emit("end" if state == COMPLETED else why, job)
        for hook in self.hooks_stop:
            hook(job, why)
        self.request_pass(full=True)

    def cancel_pending(self, job: Job, why: str) -> None:
        if job.state == PENDING:
            job.state, job.end, job.reason = CANCELLED, self.kernel.now, why
            self.queue.removed(job)
            self.finished += 1

    def fail_node(self, node: int, why: str = "failure") -> tuple[int, float]:
        """Kill the node's jobs (they restart from their last checkpoint) and take it down.
        Returns (jobs killed, GPUs those jobs held)."""
        st = self.state
        killed, gpus = self.kill_on_node(node, why)
        st.advance(self.kernel.now)
        st.fail(node)
        self.capacity_changed()
        self.emit_node("fail", node, jobs=killed)
        return killed, gpus

    def kill_on_node(self, node: int, why: str) -> tuple[int, float]:
        """Kill every job with GPUs on the node (a software failure leaves the node up)."""
        victims = sorted(self.state.node_jobs[node])
        gpus = 0.0
        for jid in victims:
            job = self.running[jid]
            gpus += job.gpu_share
            self.interrupt(job, why)
        return len(victims), gpus

    def emit_node(self, event: str, node: int, **extra: Any) -> None:
        if self.log is not None:
            self.log({"t": round(self.kernel.now, 3), "event": event, "node": self.state.nodes[node].name, **extra})

    def capacity_changed(self) -> None:
        self.epoch += 1
        self.request_pass(full=True)

    def reschedule_end(self, job: Job, end: float) -> None:
        """A running job's expected end moved (a pipeline's share of storage changed)."""
        self.kernel.cancel(job.token)
        job.expected_end = end
        job.token = self.kernel.at(end, P_END, self._on_end, job) if end < INF else None
        self.table.remove(job.id)
        self.table.add(job.id, end, job.gpu_share, int(self.state.type_index[job.placed_type]))
        self.epoch += 1

    # -- the run --------------------------------------------------------------------
    def _done(self) -> bool:
        live_services = any(not s.ended for s in self.services)
        return (self.finished >= len(self.by_id) and self._next_arrival >= len(self.jobs)
                and not live_services)

    def run(self, on_progress: Callable[[float], None] | None = None) -> None:
        k = self.kernel
        self._schedule_arrival()
        if self.policy.tick_s:
            k.after(self.policy.tick_s, P_PASS - 1, self._on_tick)
        end = self.cfg.horizon_s if self.cfg.horizon_s is not None else self.cfg.max_s
        if self.recorder is not None:
            self.recorder.begin(end)
        if self.cfg.horizon_s is None:
            # stop as soon as the workload is done: a watcher after each instant's pass
            self.hooks_pass.append(self._stop_when_done)
        if on_progress is not None:
            self.hooks_pass.append(self._progress_by_wall_clock(on_progress))
        stopped = k.run(until=end, on_progress=on_progress)
        k.stop_requested = False
        self.partial = stopped and not self._finished_cleanly
        if self.cfg.horizon_s is None and not stopped:
            for job in self.queue:   # nothing left could free or add what they need
                job.reason = job.reason or "never started: no node can hold it under this policy"
        self.end_time = k.now
        self.state.advance(k.now)
        self._account_running()

    def _account_running(self) -> None:
        """Credit the work of jobs still running at the end (as if they checkpointed now);
        their state stays RUNNING and they are reported as unfinished."""
        now = self.kernel.now
        for job in self.running.values():
            if job.kind == "pipeline" and self.pipelines is not None:
                self.pipelines.progress(job)
                continue
            sp = saved_at(job.done, job.work, job.run_speed, job.ckpt_interval, job.ckpt_write, job.run_restart,
                          now - job.run_start, keep_all=True)
            share = job.gpu_share
            job.useful_gpu_s += share * sp.useful_s
            self._credit_overheads(job, sp.ckpt_s, sp.restart_s)
            job.attained += job.gpus * (now - job.run_start)
            job.ran_s += now - job.run_start
            job.done = sp.saved
            job.run_start = now
            job.run_restart = 0.0

    def _progress_by_wall_clock(self, on_progress: Callable[[float], None]) -> Callable[[], None]:
        """The kernel reports every 20,000 events; a round-based policy spends seconds in few
        events (an LP per round), so a pass also reports once PROGRESS_EVERY_S of wall time passed."""
        import time
        due = [time.perf_counter() + PROGRESS_EVERY_S]

        def report() -> None:
            now = time.perf_counter()
            if now >= due[0]:
                due[0] = now + PROGRESS_EVERY_S
                on_progress(self.kernel.now)
        return report

    def _stop_when_done(self) -> None:
        if self._done():
            self.kernel.stop_requested = True
            self._finished_cleanly = True

    def _credit_overheads(self, job: Job, ckpt_s: float, restart_s: float) -> None:
        """GPU time of the segment now ending that held GPUs without computing: checkpoint writes,
        and the reload at its start, a failure's restart or a preemption's (a move, a time slice).
        The recorder takes them out of the busy series: the reload at the segment's start, the
        writes spread evenly over the rest of it."""
        share = job.gpu_share
        job.ckpt_gpu_s += share * ckpt_s
        if job.last_interrupt in ("", "failure"):
            job.restart_gpu_s += share * restart_s
        else:
            job.move_restart_gpu_s += share * restart_s
        if self.recorder is not None and job.kind != "replica" and ckpt_s + restart_s > 0:
            self.recorder.not_busy(job.run_start, restart_s, ckpt_s, self.kernel.now, share * job.util)

    def _emit(self, event: str, job: Job, **extra: Any) -> None:
        if self.log is not None:
            self.log({"t": round(self.kernel.now, 3), "event": event, "job": job.id, "class": job.cls, **extra})
