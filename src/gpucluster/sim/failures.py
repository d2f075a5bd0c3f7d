"""Node failures and repairs, with rates from the reliability model.

Every component of every on-premises node (GPU, HBM, host, network, NIC,
software, ... as the failure profile groups its causes) fails as its own renewal
process: time to failure exponential (constant rate) or Weibull with the same
mean (shape < 1: infant mortality, > 1: wear-out), counted from its last repair.
Rates come from the reliability model (model/reliability.py: per-GPU causes times
the node's GPUs, per-node causes once; Llama 3 by default: 419 unexpected
interruptions on 16,384 H100 in 54 days).
* a hardware component: the node's jobs are killed and the node is down for
  `repair_hours` (default: the reliability data's node_repair_h) plus `drain_hours`;
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
    component: str
    hardware: bool
    jobs_killed: int
    gpus_of_killed_jobs: float


@dataclass(frozen=True)
class Rates:
    components: tuple[tuple[str, bool], ...]          # (component, takes the node out for repair)
    per_node_hour: dict[int, tuple[float, ...]]       # by GPUs per node: rate of each component
    per_gpu_hour: float                               # all causes, for an 8-GPU node
    repair_hours: float
    source: str
    repair_source: str

    def node_rate(self, gpus: int) -> float:
        return sum(self.per_node_hour[gpus])


def rates(spec: Failures, node_sizes: set[int]) -> Rates:
    from gpucluster.catalog.operations import failure_profiles, operations
    from gpucluster.model.reliability import failure_model

    ops, sources = operations()
    repair = ops.node_repair_h
    repair_src = sources[repair.source].title if repair.source in sources else repair.source
    if spec.per_gpu_hour is not None:
        return Rates((("all", True),), {g: (spec.per_gpu_hour * g,) for g in node_sizes}, spec.per_gpu_hour,
                     repair.value, "scenario failures.per_gpu_hour (all hardware)", repair_src)
    model = failure_model(failure_profiles().get(spec.profile))
    comps = tuple(dict.fromkeys((c.component, c.hardware) for c in model.causes))
    per: dict[int, tuple[float, ...]] = {}
    for g in node_sizes:
        r = dict.fromkeys(comps, 0.0)
        for c in model.causes:  # per-GPU causes scale with the node's GPUs, per-node causes once
            r[(c.component, c.hardware)] += c.rate_per_unit_hour * (g if c.per == "gpu" else 1)
        per[g] = tuple(r[k] for k in comps)
    return Rates(comps, per, model.rate_per_hour(8, 8) / 8, repair.value,
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
        return self.rates.node_rate(int(self.sim.state.node_gpus[node]))

    def expected_rate_per_hour(self) -> float:
        st = self.sim.state
        return sum(self.node_rate_per_hour(n) for n in range(len(st.nodes)) if not st.node_cloud[n])

    def begin(self) -> None:
        st = self.sim.state
        for node in range(len(st.nodes)):
            if not st.node_cloud[node]:
                for k in range(len(self.rates.components)):
                    self._schedule(node, k)

    def _schedule(self, node: int, k: int) -> None:
        """Next failure of component k of the node, counted from now (its last renewal)."""
        from gpucluster.sim.simulator import P_FAIL
        rate = self.rates.per_node_hour[int(self.sim.state.node_gpus[node])][k]
        if rate <= 0:
            return
        mean_s = 3600.0 / rate
        if self.spec.distribution == "weibull":
            ttf = mean_s * self._weibull_scale * self.rng.weibull(self.spec.weibull_shape)
        else:
            ttf = self.rng.exponential(mean_s)
        self.sim.kernel.after(float(ttf), P_FAIL, self._on_fail, (node, k))

    def _on_fail(self, payload: tuple[int, int]) -> None:
        from gpucluster.sim.simulator import P_REPAIR
        node, k = payload
        sim = self.sim
        if not sim.state.node_up[node]:   # already out for repair: this part starts afresh
            self._schedule(node, k)
            return
        component, hardware = self.rates.components[k]
        if not hardware:
            killed, gpus = sim.kill_on_node(node, "failure")
            self.records.append(FailureRecord(sim.kernel.now, node, component, False, killed, gpus))
            self._schedule(node, k)
            return
        killed, gpus = sim.fail_node(node)
        self.records.append(FailureRecord(sim.kernel.now, node, component, True, killed, gpus))
        if self.spec.repair_hours is not None:
            repair_h = float(sample(self.spec.repair_hours, 1, self.rng, self.base)[0])
        else:
            repair_h = self.rates.repair_hours
        sim.kernel.after((repair_h + self.spec.drain_hours) * 3600.0, P_REPAIR, self._on_repair, (node, k))

    def _on_repair(self, payload: tuple[int, int]) -> None:
        node, k = payload
        self.sim.state.advance(self.sim.kernel.now)
        self.sim.state.repair(node)
        self.sim.capacity_changed()
        self.sim.emit_node("repair", node)
        self._schedule(node, k)     # the repaired part is new; the others keep their clocks
