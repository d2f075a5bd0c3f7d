"""Node failures and repairs, with rates from the reliability model.

Each on-premises node fails as a renewal process: time to failure exponential
(constant rate) or Weibull with the same mean (shape < 1: infant mortality,
> 1: wear-out), counted from its last repair. The rate per node is the sum of
the failure profile's causes for one node (model/reliability.py: per-GPU causes
times the node's GPUs, per-node causes once; Llama 3 by default: 419 unexpected
interruptions on 16,384 H100 in 54 days). Each failure is a hardware cause with
probability hardware rate / total rate (exact for exponential times):
* hardware: the node's jobs are killed and the node is down for `repair_hours`
  (default: the reliability data's node_repair_h) plus `drain_hours`;
* software (bugs, NCCL timeouts): the node's jobs are killed, the node stays up.
Killed jobs lose the work since their last checkpoint and go back to the queue.
With `per_gpu_hour` given instead, every failure is a hardware one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpucluster.sim.distributions import sample
from gpucluster.specs.scenario import Failures


@dataclass
class FailureRecord:
    time: float
    node: int
    hardware: bool
    jobs_killed: int
    gpus_of_killed_jobs: float


@dataclass(frozen=True)
class Rates:
    hardware_per_node_hour: dict[int, float]    # by GPUs per node
    software_per_node_hour: dict[int, float]
    per_gpu_hour: float                         # all causes, for an 8-GPU node
    repair_hours: float
    source: str
    repair_source: str


def rates(spec: Failures, node_sizes: set[int]) -> Rates:
    from gpucluster.catalog.operations import failure_profiles, operations
    from gpucluster.model.reliability import failure_model

    ops, sources = operations()
    repair = ops.node_repair_h
    repair_src = sources[repair.source].title if repair.source in sources else repair.source
    if spec.per_gpu_hour is not None:
        hw = {g: spec.per_gpu_hour * g for g in node_sizes}
        return Rates(hw, dict.fromkeys(node_sizes, 0.0), spec.per_gpu_hour, repair.value,
                     "scenario failures.per_gpu_hour (all hardware)", repair_src)
    model = failure_model(failure_profiles().get(spec.profile))
    hw = {g: model.node_down_rate_per_hour(g) for g in node_sizes}
    sw = {g: model.rate_per_hour(g, g) - hw[g] for g in node_sizes}
    return Rates(hw, sw, model.rate_per_hour(8, 8) / 8, repair.value,
                 f"reliability profile {model.profile}: {model.description}", repair_src)


class FailureProcess:
    def __init__(self, sim: Any, spec: Failures, rng, base=None) -> None:
        self.sim, self.spec, self.rng, self.base = sim, spec, rng, base
        st = sim.state
        sizes = {int(g) for g in st.node_gpus}
        self.rates = rates(spec, sizes)
        self.per_gpu_hour = self.rates.per_gpu_hour
        self.source = self.rates.source
        self.records: list[FailureRecord] = []
        self._weibull_scale = 1.0 / math.gamma(1.0 + 1.0 / spec.weibull_shape)

    def node_rate_per_hour(self, node: int) -> float:
        g = int(self.sim.state.node_gpus[node])
        return self.rates.hardware_per_node_hour[g] + self.rates.software_per_node_hour[g]

    def expected_rate_per_hour(self) -> float:
        st = self.sim.state
        return sum(self.node_rate_per_hour(n) for n in range(len(st.nodes)) if not st.node_cloud[n])

    def begin(self) -> None:
        st = self.sim.state
        for node in range(len(st.nodes)):
            if not st.node_cloud[node]:
                self._schedule(node)

    def _schedule(self, node: int) -> None:
        from gpucluster.sim.simulator import P_FAIL
        rate = self.node_rate_per_hour(node)
        if rate <= 0:
            return
        mean_s = 3600.0 / rate
        if self.spec.distribution == "weibull":
            ttf = mean_s * self._weibull_scale * self.rng.weibull(self.spec.weibull_shape)
        else:
            ttf = self.rng.exponential(mean_s)
        self.sim.kernel.after(float(ttf), P_FAIL, self._on_fail, node)

    def _on_fail(self, node: int) -> None:
        from gpucluster.sim.simulator import P_REPAIR
        sim = self.sim
        g = int(sim.state.node_gpus[node])
        hw = self.rates.hardware_per_node_hour[g]
        hardware = self.rng.random() * self.node_rate_per_hour(node) < hw
        if not hardware:
            killed, gpus = sim.kill_on_node(node, "failure")
            self.records.append(FailureRecord(sim.kernel.now, node, False, killed, gpus))
            self._schedule(node)
            return
        killed, gpus = sim.fail_node(node)
        self.records.append(FailureRecord(sim.kernel.now, node, True, killed, gpus))
        if self.spec.repair_hours is not None:
            repair_h = float(sample(self.spec.repair_hours, 1, self.rng, self.base)[0])
        else:
            repair_h = self.rates.repair_hours
        sim.kernel.after((repair_h + self.spec.drain_hours) * 3600.0, P_REPAIR, self._on_repair, node)

    def _on_repair(self, node: int) -> None:
        self.sim.state.advance(self.sim.kernel.now)
        self.sim.state.repair(node)
        self.sim.capacity_changed()
        self.sim.emit_node("repair", node)
        self._schedule(node)
