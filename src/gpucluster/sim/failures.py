"""Node failures and repairs.

Each on-premises node fails as a renewal process: time to failure exponential
(constant rate) or Weibull with the same mean (shape < 1: infant mortality,
> 1: wear-out), counted from its last repair. A failed node kills its jobs (they
lose the work since their last checkpoint and go back to the queue), is repaired
after `repair_hours` and rejoins after `drain_hours` of health checks.

Rate per GPU-hour: the scenario's, else the reliability model's when it is
installed, else Llama 3's count (419 unexpected interruptions on 16,384 GPUs in
54 days, all causes, hardware and software, attributed evenly per GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpucluster.sim.distributions import sample
from gpucluster.specs.scenario import LLAMA3_PER_GPU_HOUR, LLAMA3_SOURCE, Failures


@dataclass
class FailureRecord:
    time: float
    node: int
    jobs_killed: int
    gpus_of_killed_jobs: float


def default_rate(gpu_type: str | None = None) -> tuple[float, str]:
    """Failures per GPU-hour and where the number comes from."""
    try:  # the reliability model (per-component rates), when present
        from gpucluster.model import reliability  # type: ignore[attr-defined]
        fn = getattr(reliability, "failures_per_gpu_hour", None)
        if fn is not None:
            rate = fn(gpu_type) if gpu_type else fn()
            src = getattr(reliability, "SOURCE", "gpucluster.model.reliability")
            return float(rate), str(src)
    except ImportError:
        pass
    return LLAMA3_PER_GPU_HOUR, LLAMA3_SOURCE


class FailureProcess:
    def __init__(self, sim: Any, spec: Failures, rng, base=None) -> None:
        self.sim, self.spec, self.rng, self.base = sim, spec, rng, base
        if spec.per_gpu_hour is not None:
            self.per_gpu_hour, self.source = spec.per_gpu_hour, "scenario failures.per_gpu_hour"
        else:
            self.per_gpu_hour, self.source = default_rate()
        self.records: list[FailureRecord] = []
        self._weibull_scale = 1.0 / math.gamma(1.0 + 1.0 / spec.weibull_shape)

    def begin(self) -> None:
        st = self.sim.state
        for node in range(len(st.nodes)):
            if not st.node_cloud[node]:
                self._schedule(node)

    def _schedule(self, node: int) -> None:
        from gpucluster.sim.simulator import P_FAIL
        mean_s = 3600.0 / (self.per_gpu_hour * int(self.sim.state.node_gpus[node]))
        if self.spec.distribution == "weibull":
            ttf = mean_s * self._weibull_scale * self.rng.weibull(self.spec.weibull_shape)
        else:
            ttf = self.rng.exponential(mean_s)
        self.sim.kernel.after(float(ttf), P_FAIL, self._on_fail, node)

    def _on_fail(self, node: int) -> None:
        from gpucluster.sim.simulator import P_REPAIR
        sim = self.sim
        killed, gpus = sim.fail_node(node)
        self.records.append(FailureRecord(sim.kernel.now, node, killed, gpus))
        repair_h = float(sample(self.spec.repair_hours, 1, self.rng, self.base)[0]) + self.spec.drain_hours
        sim.kernel.after(repair_h * 3600.0, P_REPAIR, self._on_repair, node)

    def _on_repair(self, node: int) -> None:
        self.sim.state.advance(self.sim.kernel.now)
        self.sim.state.repair(node)
        self.sim.capacity_changed()
        self.sim.emit_node("repair", node)
        self._schedule(node)
