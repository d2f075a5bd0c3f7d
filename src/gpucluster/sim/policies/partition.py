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
            while got < spec.gpus and k < len(order):
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
            if job.gpu_share > self.sizes[part]:
                out.append(Reject(job, f"asks for {job.gpus} GPUs, more than its partition {part!r} has "
                                       f"({self.sizes[part]})"))
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
