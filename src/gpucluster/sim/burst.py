"""Cloud burst: rented nodes that start when jobs wait too long and stop when idle.

The seed's hybrid cluster ("128 H100s on-prem for steady-state training, plus spot
instances from three cloud providers for burst capacity"). A job still waiting
`after_wait_minutes` after it was queued asks for enough cloud nodes to hold it
(up to `max_nodes` in all); a node serves after `provision_minutes` (billed from
the request), is handed back after `idle_release_minutes` without jobs, and, as
a spot instance, may be reclaimed (`interruptions_per_node_hour`), which kills
its jobs like a failure (they restart from their last checkpoint).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.sim.jobs import PENDING, Job


class Burst:
    def __init__(self, sim: Any, spec: Any, nodes: np.ndarray, rng) -> None:
        self.sim, self.spec, self.nodes, self.rng = sim, spec, nodes, rng
        self.provisioning: set[int] = set()
        self.billed_since: dict[int, float] = {}
        self.billed_gpu_s = 0.0
        self.started = 0
        self.reclaims = 0
        self._idle_token: dict[int, int] = {}
        self._reclaim_token: dict[int, int] = {}
        self.gpu_type = sim.state.nodes[int(nodes[0])].gpu_type if len(nodes) else None
        sim.hooks_stop.append(self._after_stop)
        sim.hooks_start.append(self._after_start)

    def on_queued(self, job: Job) -> None:
        from gpucluster.sim.simulator import P_BURST
        if self.gpu_type is None or (job.types is not None and self.gpu_type not in job.types):
            return
        if job.speeds and job.speed_on(self.gpu_type) <= 0:
            return
        self.sim.kernel.after(self.spec.after_wait_minutes * 60.0, P_BURST, self._check, (job, job.restarts,
                                                                                          job.preemptions))

    def _check(self, payload: tuple) -> None:
        from gpucluster.sim.simulator import P_BURST
        job, restarts, preemptions = payload
        if job.state != PENDING or (job.restarts, job.preemptions) != (restarts, preemptions):
            return
        st = self.sim.state
        off = [int(n) for n in self.nodes if not st.node_on[n] and int(n) not in self.provisioning]
        per_node = int(st.node_gpus[self.nodes[0]])
        want = -(-job.gpus * job.milli // (1000 * per_node)) if job.milli >= 1000 else 1
        spare = sum(int(st.avail[n]) for n in self.nodes if st.node_on[n]) + per_node * len(self.provisioning)
        want = max(0, want - spare // per_node)
        for node in off[:want]:
            self.provisioning.add(node)
            self.billed_since[node] = self.sim.kernel.now
            self.started += 1
            self.sim.kernel.after(self.spec.provision_minutes * 60.0, P_BURST, self._ready, node)
            self.sim.emit_node("provision", node)

    def _ready(self, node: int) -> None:
        st = self.sim.state
        self.provisioning.discard(node)
        st.advance(self.sim.kernel.now)
        st.power(node, True)
        self.sim.capacity_changed()
        self._arm_idle(node)
        rate = self.spec.interruptions_per_node_hour
        if rate > 0:
            from gpucluster.sim.simulator import P_FAIL
            self._reclaim_token[node] = self.sim.kernel.after(float(self.rng.exponential(3600.0 / rate)), P_FAIL,
                                                              self._reclaim, node)

    def _arm_idle(self, node: int) -> None:
        from gpucluster.sim.simulator import P_BURST
        self.sim.kernel.cancel(self._idle_token.pop(node, None))
        if not self.sim.state.node_jobs[node]:
            self._idle_token[node] = self.sim.kernel.after(self.spec.idle_release_minutes * 60.0, P_BURST,
                                                           self._release, node)

    def _after_start(self, job: Job) -> None:
        if self.gpu_type is None or job.gpu_type != self.gpu_type:
            return
        for node in np.unique(self.sim.state.gpu_node[job.alloc]).tolist():
            self.sim.kernel.cancel(self._idle_token.pop(node, None))

    def _after_stop(self, job: Job, why: str) -> None:
        st = self.sim.state
        if self.gpu_type is None or job.gpu_type != self.gpu_type:
            return
        for node in self.nodes.tolist():
            if st.node_on[node] and not st.node_jobs[node] and node not in self._idle_token:
                self._arm_idle(node)

    def _release(self, node: int) -> None:
        st = self.sim.state
        self._idle_token.pop(node, None)
        if st.node_jobs[node] or not st.node_on[node]:
            return
        self._power_off(node)

    def _power_off(self, node: int) -> None:
        st, now = self.sim.state, self.sim.kernel.now
        self.sim.kernel.cancel(self._reclaim_token.pop(node, None))
        st.advance(now)
        st.power(node, False)
        self.billed_gpu_s += (now - self.billed_since.pop(node, now)) * int(st.node_gpus[node])
        self.sim.capacity_changed()
        self.sim.emit_node("release", node)

    def _reclaim(self, node: int) -> None:
        """A spot reclaim: the node's jobs are killed and the node goes back to the provider."""
        self._reclaim_token.pop(node, None)
        st = self.sim.state
        if not st.node_on[node]:
            return
        self.reclaims += 1
        for jid in sorted(st.node_jobs[node]):
            self.sim.interrupt(self.sim.running[jid], "spot reclaim")
        self.sim.kernel.cancel(self._idle_token.pop(node, None))
        self._power_off(node)

    def finish(self, now: float) -> None:
        st = self.sim.state
        for node, since in list(self.billed_since.items()):
            self.billed_gpu_s += (now - since) * int(st.node_gpus[node])
            self.billed_since[node] = now
