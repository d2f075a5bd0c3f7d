"""Static partitions: each queue owns a fixed slice of the nodes and nothing else.

The queues' `gpus` set the slices (whole nodes, in pool order: a queue of 64
GPUs on 8-GPU nodes gets 8 nodes); nodes left over form the `default` partition,
which jobs of queues without a slice use. Inside a partition jobs start in
arrival order with head-of-line blocking (FIFO), so `fifo` on the whole cluster
is the shared-pool counterpart: same jobs, same order, one pool. Jobs larger than
their partition are rejected (reported), not queued forever.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.sim.placement import Scratch
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, Reject, Start, View


@policies.register("partition", "static-partitions", "partitions")
class StaticPartitions(Policy):
    name = "partition"
    summary = "static partitions per queue (the queues' gpus), FIFO inside each; compare with fifo"

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        self.masks: dict[str, np.ndarray] = {}
        self.sizes: dict[str, int] = {}

    def prepare(self, sim: Any) -> None:
        st = sim.state
        free = ~st.node_cloud
        order = np.flatnonzero(free)
        k = 0
        for q, spec in self.queues.items():
            mask = np.zeros(len(st.nodes), dtype=bool)
            got = 0
            while got < spec.total_gpus and k < len(order):
                mask[order[k]] = True
                got += int(st.node_gpus[order[k]])
                k += 1
            self.masks[q], self.sizes[q] = mask, got
        rest = np.zeros(len(st.nodes), dtype=bool)
        rest[order[k:]] = True
        rest |= st.node_cloud
        if "default" not in self.masks:
            self.masks["default"], self.sizes["default"] = rest, int(st.node_gpus[rest].sum())

    def schedule(self, view: View) -> list[Decision]:
        scr = Scratch(view.state)
        out: list[Decision] = []
        blocked: set[str] = set()
        for job in view.queue:
            part = job.queue if job.queue in self.masks else "default"
            if part in blocked:
                continue
            fit = self._room(view, job, part)
            if job.gpu_share > fit:
                out.append(Reject(job, f"asks for {job.gpus} GPUs, more than its partition {part!r} has "
                                       f"of its GPU types ({fit})"))
                continue
            g = self.place(view, scr, job, self.masks[part])
            if g is None:
                blocked.add(part)
                if len(blocked) == len(self.masks):
                    break
                continue
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        return out

    def _room(self, view: View, job, part: str) -> int:
        """GPUs of the partition the job could ever use (its types; a share or a one-node gang
        needs one node big enough)."""
        st = view.state
        best = 0
        for t in view.types_for(job):
            m = self.masks[part] if t is None else self.masks[part] & (st.node_type == st.type_index[t])
            if job.cpu_milli or job.mem_mib:
                m = m & ((st.cpu_cap == 0) | (st.cpu_cap >= job.cpu_milli)) & (
                    (st.mem_cap == 0) | (st.mem_cap >= job.mem_mib))
            if not m.any():
                continue
            if job.milli < 1000:
                best = max(best, 1)
            elif job.gpus <= int(st.node_gpus.max()) and (job.cpu_milli or job.mem_mib):
                best = max(best, int(st.node_gpus[m].max()))
            else:
                best = max(best, int(st.node_gpus[m].sum()))
        return best
