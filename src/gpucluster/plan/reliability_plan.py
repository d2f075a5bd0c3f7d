"""A reliability plan for a training job on a cluster: MTBF, checkpoint tier and interval,
lost work per failure, goodput and spare nodes, with every assumption named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucluster.catalog.operations import failure_profiles, operations
from gpucluster.errors import UserError
from gpucluster.model.checkpoint import (
    CheckpointOption,
    CheckpointSize,
    checkpoint_options,
    checkpoint_size,
)
from gpucluster.model.reliability import (
    FailureModel,
    IntervalPlan,
    Spares,
    failure_model,
    plan_interval,
    spare_nodes,
    young_interval,
)
from gpucluster.specs.workload import TransformerSpec

if TYPE_CHECKING:  # annotations only: the cluster spec models stay off `plan train --gpu`'s start-up
    from gpucluster.specs.cluster import ClusterSpec

# The seed article's failure claims (seed 1, "The Distributed System Architecture Nobody Talks About"):
# nodes -> claimed time between failures, hours; and "saving checkpoints every 30 minutes" (seed 2).
SEED_MTBF_CLAIMS = ((256, 6.0), (1000, 1.5), (10000, 5 / 60))
SEED_CHECKPOINT_INTERVAL_S = 30 * 60


def load_failure_model(name: str = "llama3") -> FailureModel:
    return failure_model(failure_profiles().get(name, field="--profile"))


@dataclass(frozen=True)
class OptionPlan:
    option: CheckpointOption
    young_s: float
    optimal: IntervalPlan          # Daly's interval (bounded below by the async copy)
    given: IntervalPlan | None     # the user's interval, if any

    @property
    def chosen(self) -> IntervalPlan:
        return self.given or self.optimal


@dataclass
class ReliabilityPlan:
    cluster: str
    model: str
    failures: FailureModel
    gpus: int
    gpus_per_node: int
    nodes: int
    size: CheckpointSize
    options: list[OptionPlan]
    spares: Spares
    restart_overhead_s: float
    assumptions: list[str] = field(default_factory=list)

    @property
    def rate_per_hour(self) -> float:
        return self.failures.rate_per_hour(self.gpus, self.gpus_per_node)

    @property
    def mtbf_s(self) -> float:
        return 3600.0 / self.rate_per_hour

    @property
    def best(self) -> OptionPlan:
        """The durable option with the highest goodput at its optimal interval."""
        durable = [o for o in self.options if o.option.durable] or self.options
        return max(durable, key=lambda o: o.optimal.goodput)

    def option(self, name: str) -> OptionPlan:
        for o in self.options:
            if o.option.name == name or o.option.name.split(" -> ")[0] == name:
                return o
        from gpucluster.errors import unknown_name
        raise unknown_name("checkpoint tier", name, [o.option.name for o in self.options], field="--tier")


def reliability_plan(spec: ClusterSpec, model: TransformerSpec, *, profile: str = "llama3", pool: str | None = None,
                     nodes: int | None = None, interval_s: float | None = None, precision: str = "bf16",
                     restart_overhead_s: float | None = None, repair_h: float | None = None,
                     quantile: float = 0.99) -> ReliabilityPlan:
    p = spec.pool(pool) if pool else spec.node_pools[0]
    n = nodes if nodes is not None else p.count
    if not 1 <= n <= p.count:
        raise UserError(f"pool {p.name!r} has {p.count} nodes, asked for {n}", field="--nodes")
    fm = load_failure_model(profile)
    ops, _ = operations()
    overhead = ops.restart_overhead_s.value if restart_overhead_s is None else restart_overhead_s
    repair = ops.node_repair_h.value if repair_h is None else repair_h
    gpus = n * p.gpus_per_node
    mtbf_s = 3600.0 / fm.rate_per_hour(gpus, p.gpus_per_node)
    size = checkpoint_size(model, precision)
    opts = checkpoint_options(spec, size.total_bytes, n, p.name)
    if not opts:
        raise UserError(f"cluster {spec.name!r} has no storage tiers to checkpoint to; add `storage:` to the spec")
    plans = []
    for o in opts:
        restart = overhead + o.read_s
        optimal = plan_interval(o.delta_s, mtbf_s, restart, extra_loss_s=o.copy_s, min_interval_s=o.copy_s)
        given = None if interval_s is None else plan_interval(o.delta_s, mtbf_s, restart, interval_s=interval_s,
                                                              extra_loss_s=o.copy_s)
        plans.append(OptionPlan(o, young_interval(o.delta_s, mtbf_s), optimal, given))
    spares = spare_nodes(p.count, fm.node_down_rate_per_hour(p.gpus_per_node), repair, quantile)
    restart_src = "given" if restart_overhead_s is not None else ops_source("restart_overhead_s")
    assumptions = [
        (f"failure rates: profile {fm.profile} ({fm.description}); a job fails when any of its GPUs or nodes "
         "does (rates add, MTBF falls as 1/N)"),
        ("checkpoint = weights + optimizer state (14 bytes per parameter for mixed-precision Adam), sharded "
         "over every node"),
        f"restart = {overhead:.0f} s to detect, reschedule and relaunch ({restart_src}) + reading the checkpoint",
        ("local NVMe checkpoints count as durable only after the async copy to the shared tier; the copy time "
         "adds to the work lost per failure"),
        (f"spares: nodes out for repair ~ Poisson(nodes x hardware failure rate x {repair:.0f} h repair), "
         f"{quantile:.0%} quantile"),
    ]
    return ReliabilityPlan(spec.name, model.name or "model", fm, gpus, p.gpus_per_node, n, size, plans, spares,
                           overhead, assumptions)


def ops_source(name: str) -> str:
    ops, sources = operations()
    src = sources[getattr(ops, name).source]
    return f"{src.title} ({src.kind}, {src.date})"


@dataclass(frozen=True)
class SeedClaim:
    nodes: int
    claimed_mtbf_h: float
    model_mtbf_h: float

    @property
    def ratio(self) -> float:
        """How much more often the seed says things fail than the profile does."""
        return self.model_mtbf_h / self.claimed_mtbf_h


def seed_claims(failures: FailureModel, gpus_per_node: int = 8) -> list[SeedClaim]:
    return [SeedClaim(n, h, failures.mtbf_hours(n * gpus_per_node, gpus_per_node)) for n, h in SEED_MTBF_CLAIMS]
