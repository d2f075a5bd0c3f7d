"""Time to train with failures, restarts and checkpoint writes included (goodput), for `plan train`.

The same checkpoint interval as the job `generate` writes (generate/megatron_job.py
`checkpointing`, tests/plan/test_goodput_generate.py holds them equal):
- the job's MTBF: the failure profile's rates for its GPUs and nodes (catalog failures.yaml;
  rates add, MTBF falls as 1/N: model/reliability.py);
- one blocking checkpoint write: the cluster's storage tiers with `--cluster` (the tier
  `gpucluster reliability` picks: the durable one with the highest goodput), else the
  checkpoint's size (weights + optimizer state, model/checkpoint.py) over
  `--checkpoint-write-gbps` (an input; its default, 10 GB/s, is an assumption said wherever used);
- Daly's interval (Daly 2006 eq. 37), or the user's `--checkpoint-interval`, rounded to whole
  iterations of the plan's step time, as `--save-interval` is written.
Goodput is Daly's wall-clock model at that interval with restart R = the restart overhead
(`--restart-s`, default the catalog's ops estimate) + reading the checkpoint back; the time,
GPU-hours and cost with failures are the failure-free ones over goodput.

Kept off `plan train --gpu`'s imports: the reliability planner (and the cluster spec models) load
only with `--cluster` (tests/cli/test_app_lazy.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucluster.errors import UserError
from gpucluster.units import format_duration

if TYPE_CHECKING:
    from gpucluster.plan.train_plan import TrainingPlan

# Aggregate checkpoint write bandwidth when no storage is described: the value generate's
# DEFAULT_WRITE_GBPS holds (a mid-size parallel filesystem; test_goodput_generate.py keeps them equal).
DEFAULT_CHECKPOINT_WRITE_GBPS = 10.0
DEFAULT_FAILURE_PROFILE = "llama3"
MAX_RESTART_S = 10 * 365 * 86400.0
MAX_WRITE_GBPS = 1e6       # GB/s aggregate: far above any storage system
MIN_WRITE_GBPS = 1e-6      # 1 KB/s: below it a checkpoint's write time overflows a float
# Below a millionth of the wall time spent training (Daly's model falls to 0 past e^-700), the
# run is reported as never finishing rather than as a time of 10^190 years.
MIN_GOODPUT = 1e-6


@dataclass(frozen=True)
class GoodputInputs:
    """What a user knows about running the job; None: the documented default."""
    failure_profile: str = DEFAULT_FAILURE_PROFILE
    checkpoint_write_gbps: float | None = None   # None: the cluster's storage tiers, else 10 GB/s (assumed)
    restart_s: float | None = None               # None: the catalog's restart overhead (ops estimate)
    checkpoint_interval_s: float | None = None   # None: Daly's optimum

    def check(self) -> None:
        g, r, i = self.checkpoint_write_gbps, self.restart_s, self.checkpoint_interval_s
        if g is not None and not (MIN_WRITE_GBPS <= g <= MAX_WRITE_GBPS):
            raise UserError(f"must be from {MIN_WRITE_GBPS:g} to {MAX_WRITE_GBPS:g} GB/s, got {g}",
                            field="--checkpoint-write-gbps")
        if r is not None and not (0 <= r <= MAX_RESTART_S):
            raise UserError(f"must be from 0 to {MAX_RESTART_S:g} s (10 years), got {r}", field="--restart-s")
        if i is not None and not (0 < i <= MAX_RESTART_S):
            raise UserError(f"must be above 0 and at most 10 years, got {i} s", field="--checkpoint-interval")


def goodput_inputs(failure_profile: str = DEFAULT_FAILURE_PROFILE, checkpoint_write_gbps: float | None = None,
                   restart_s: float | None = None, checkpoint_interval: str | float | None = None) -> GoodputInputs:
    """The options as given (an interval as generate's --checkpoint-interval: 30m, 2h, 1800 s), checked
    before the layout search runs."""
    from gpucluster.catalog.operations import failure_profiles

    failure_profiles().get(failure_profile, field="--failure-profile")
    interval_s = None
    if checkpoint_interval is not None:
        from gpucluster.specs.durations import parse_duration

        try:
            interval_s = parse_duration(checkpoint_interval, "s")
        except (ValueError, OverflowError):
            raise UserError(f"not a duration above 0: {str(checkpoint_interval)[:40]!r} (e.g. 30m, 2h, 1800)",
                            field="--checkpoint-interval") from None
    inputs = GoodputInputs(failure_profile, checkpoint_write_gbps, restart_s, interval_s)
    inputs.check()
    return inputs


@dataclass(frozen=True)
class WithFailures:
    """The run with failures, restarts and checkpoint writes included (seconds unless named)."""
    failure_free_s: float
    failure_free_gpu_hours: float
    goodput: float                 # failure-free time / wall time, Daly's wall-clock model
    interval_s: float              # training between checkpoints, whole iterations of the step
    save_interval: int             # the same in iterations (Megatron-LM --save-interval)
    interval_source: str           # "Daly" or "given"
    daly_s: float                  # Daly's optimum before rounding to iterations
    young_s: float                 # Young's first-order interval, for comparison
    mtbf_s: float
    write_s: float                 # one blocking checkpoint write
    copy_s: float                  # async copy to a durable tier (local NVMe tiers), else 0
    read_s: float                  # reading the checkpoint back on restart
    restart_overhead_s: float      # detect, reschedule, relaunch
    checkpoint_bytes: float
    storage: str                   # where checkpoints go and what bounds the write
    profile: str
    generate_flags: list[str]      # `generate` options that make the job checkpoint at this interval
    assumptions: list[str] = field(default_factory=list)
    usd_per_gpu_hour: float | None = None

    @property
    def restart_s(self) -> float:
        return self.restart_overhead_s + self.read_s

    @property
    def wall_s(self) -> float:
        return self.failure_free_s / self.goodput

    @property
    def gpu_hours(self) -> float:
        return self.failure_free_gpu_hours / self.goodput

    @property
    def cost_usd(self) -> float | None:
        return None if self.usd_per_gpu_hour is None else self.gpu_hours * self.usd_per_gpu_hour

    @property
    def expected_failures(self) -> float:
        return self.wall_s / self.mtbf_s

    @property
    def checkpoints(self) -> int:
        return math.ceil(self.failure_free_s / self.interval_s)

    def to_json(self, lo: float | None = None, hi: float | None = None, level: float | None = None) -> dict[str, Any]:
        """The JSON fields; lo/hi: the step time's interval as ratios of the point value."""
        out: dict[str, Any] = {
            "goodput": self.goodput, "time_to_train_s": self.wall_s, "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd, "failure_free_time_to_train_s": self.failure_free_s,
            "checkpoint_interval_s": self.interval_s, "save_interval_iterations": self.save_interval,
            "checkpoint_interval_source": self.interval_source, "daly_interval_s": self.daly_s,
            "young_interval_s": self.young_s, "mtbf_s": self.mtbf_s, "expected_failures": self.expected_failures,
            "checkpoint_write_s": self.write_s, "checkpoint_copy_s": self.copy_s, "checkpoint_read_s": self.read_s,
            "restart_overhead_s": self.restart_overhead_s, "restart_s": self.restart_s,
            "checkpoint_bytes": self.checkpoint_bytes, "storage": self.storage, "failure_profile": self.profile,
            "generate_flags": list(self.generate_flags), "assumptions": list(self.assumptions), "interval": None}
        if lo is not None and hi is not None and level is not None:
            cost = self.cost_usd
            out["interval"] = {
                "level": level,
                "time_to_train_s": {"lo": self.wall_s * lo, "hi": self.wall_s * hi},
                "gpu_hours": {"lo": self.gpu_hours * lo, "hi": self.gpu_hours * hi},
                "cost_usd": None if cost is None else {"lo": cost * lo, "hi": cost * hi}}
        return out


def _checkpoint_precision(plan: TrainingPlan) -> str:
    return str(plan.best.layout.precision)


def with_failures(plan: TrainingPlan, inputs: GoodputInputs | None = None, *, cluster: str | None = None,
                  pool: str | None = None) -> WithFailures:
    """The plan's run with failures, restarts and checkpoint writes (module docstring)."""
    from gpucluster.catalog.operations import failure_profiles, operations
    from gpucluster.model.checkpoint import checkpoint_size
    from gpucluster.model.reliability import failure_model, plan_interval, young_interval

    inputs = inputs or GoodputInputs()
    inputs.check()
    fm = failure_model(failure_profiles().get(inputs.failure_profile, field="--failure-profile"))
    ops, sources = operations()
    src = sources[ops.restart_overhead_s.source]
    overhead = ops.restart_overhead_s.value if inputs.restart_s is None else inputs.restart_s
    restart_src = ("given: --restart-s" if inputs.restart_s is not None else
                   f"default: catalog failures.yaml operations.restart_overhead_s, {src.kind} {src.date}; --restart-s")
    step = plan.best.step_s
    gpus, per_node, nodes = plan.target.gpus, plan.target.fabric.gpus_per_node, plan.target.nodes
    mtbf_s = 3600.0 / fm.rate_per_hour(gpus, per_node)
    size = checkpoint_size(plan.spec, _checkpoint_precision(plan)).total_bytes
    tiers = None
    if cluster is not None and inputs.checkpoint_write_gbps is None:
        tiers = _cluster_tier(plan, cluster, pool, inputs, overhead)
    if tiers is not None:
        write_s, copy_s, read_s, storage, flags = tiers
        storage_line = f"checkpoint storage: {storage} (the cluster file's storage tiers; --checkpoint-write-gbps)"
    else:
        gbps = DEFAULT_CHECKPOINT_WRITE_GBPS if inputs.checkpoint_write_gbps is None else inputs.checkpoint_write_gbps
        write_s, copy_s = size / (gbps * 1e9), 0.0
        read_s = write_s              # read back about as fast as written (as generate assumes)
        storage = f"shared storage at {gbps:g} GB/s aggregate"
        flags = ["--checkpoint-write-gbps", f"{gbps:.17g}"]
        why = ("given: --checkpoint-write-gbps" if inputs.checkpoint_write_gbps is not None else
               "default, an assumption" + ("; the cluster file has no storage tiers" if cluster is not None else
                                           "; --cluster with storage tiers, or --checkpoint-write-gbps"))
        storage_line = (f"checkpoint write {gbps:g} GB/s to shared storage ({why}), read back as fast; "
                        f"{size / 1e9:,.0f} GB per checkpoint")
    restart = overhead + read_s
    given = inputs.checkpoint_interval_s
    ip = plan_interval(write_s, mtbf_s, restart, interval_s=given, extra_loss_s=copy_s,
                       min_interval_s=copy_s if given is None else 0.0)
    save = max(1, round(ip.interval_s / step))
    interval_s = save * step
    rounded = plan_interval(write_s, mtbf_s, restart, interval_s=interval_s, extra_loss_s=copy_s)
    daly = plan_interval(write_s, mtbf_s, restart, extra_loss_s=copy_s, min_interval_s=copy_s).interval_s
    if not rounded.goodput >= MIN_GOODPUT:
        # Restarts or checkpoints take (nearly) all the time between failures: no finite plan.
        field = ("--restart-s" if restart >= max(write_s, interval_s) else
                 "--checkpoint-interval" if given is not None else "--checkpoint-write-gbps")
        raise UserError(f"the run never finishes: one failure every {format_duration(mtbf_s)} "
                        f"({fm.profile} rates, {gpus:,} GPUs), but a restart takes {format_duration(restart)}, a "
                        f"checkpoint write {format_duration(write_s)} and the interval is "
                        f"{format_duration(interval_s)}", field=field)
    if given is not None:
        flags = [*flags, "--checkpoint-interval", f"{given:.17g}"]
    rent = plan.rental()
    assumptions = [
        (f"failure rates: profile {fm.profile} ({fm.description}; --failure-profile); a job fails when any of "
         f"its {gpus:,} GPUs or {nodes:,} nodes does: one failure every {format_duration(mtbf_s)}"),
        storage_line,
        f"restart: {overhead:,.0f} s to detect, reschedule and relaunch ({restart_src}) + reading the checkpoint "
        f"({format_duration(read_s)})",
        (f"checkpoint interval: {'given (--checkpoint-interval)' if given is not None else 'Daly (2006) optimum'}, "
         f"{save:,} iterations of the {step:.3f} s step, as `generate` writes --save-interval "
         f"(with {' '.join(flags)})"),
        "goodput: Daly's (2006) wall-clock model, failures exponential; its interval is the step time's "
        "at this goodput (the checkpoint interval is set in seconds)",
    ]
    return WithFailures(
        failure_free_s=plan.time_to_train_s, failure_free_gpu_hours=plan.gpu_hours, goodput=rounded.goodput,
        interval_s=interval_s, save_interval=save, interval_source="given" if given is not None else "Daly",
        daly_s=daly, young_s=young_interval(write_s, mtbf_s), mtbf_s=mtbf_s, write_s=write_s, copy_s=copy_s,
        read_s=read_s, restart_overhead_s=overhead, checkpoint_bytes=size, storage=storage, profile=fm.profile,
        generate_flags=flags, assumptions=assumptions, usd_per_gpu_hour=None if rent is None else rent[0])


def _cluster_tier(plan: TrainingPlan, cluster: str, pool: str | None, inputs: GoodputInputs, overhead: float
                  ) -> tuple[float, float, float, str, list[str]] | None:
    """(write, copy, read, where, generate flags) of the tier `gpucluster reliability` picks; None
    when the cluster file describes no storage."""
    from gpucluster.plan.reliability_plan import reliability_plan
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(cluster)
    if not spec.storage:
        return None
    rel = reliability_plan(spec, plan.spec, profile=inputs.failure_profile, pool=pool, nodes=plan.target.nodes,
                           precision=_checkpoint_precision(plan), restart_overhead_s=overhead)
    o = rel.best.option
    where = f"{o.name}, {format_duration(o.delta_s)} write ({o.limit})" + (
        f" + {format_duration(o.copy_s)} async copy" if o.copy_s else "")
    if pool is not None and pool != spec.node_pools[0].name:
        # generate --cluster reads the first pool's storage link (it takes no --pool yet)
        where += (f"; `generate --cluster` reads the storage link of the first pool ({spec.node_pools[0].name}), "
                  f"not of {pool}")
    return o.delta_s, o.copy_s, o.read_s, where, ["--cluster", cluster]
