"""The scenario spec: a cluster, the workloads that arrive on it, a policy, failures.

A user writes one YAML file per experiment (see `examples/scenarios/`);
`load_scenario` validates it and reports problems as `file:line: field: reason`.
The cluster is a path to a cluster spec (relative to the scenario file) or the
spec itself inline. Units are in the field names (`_hours`, `_s`, `_tb`, ...).

Distributions of sizes and durations are written as a number (fixed), a list
(uniform choice), or a mapping with `dist:` (see `Dist`). Sampling lives in
gpucluster.sim.workload; this module is data only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from gpucluster.files import is_file
from gpucluster.errors import UserError
from gpucluster.specs.cluster import ClusterSpec, _canonical
from gpucluster.specs.loader import load_yaml


MAX_ARRIVALS = 10_000_000   # jobs one workload may submit: 100x the simulator's speed benchmark


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Dist(Strict):
    """A distribution of a positive number. Shorthands: `8` (fixed), `[1, 2, 8]` (uniform choice)."""
    dist: Literal["fixed", "uniform", "exponential", "lognormal", "weibull", "choice", "empirical"]
    value: float | None = Field(None, gt=0, description="fixed: the value")
    low: float | None = Field(None, ge=0, description="uniform: lower bound")
    high: float | None = Field(None, gt=0, description="uniform: upper bound")
    mean: float | None = Field(None, gt=0, description="exponential: mean")
    median: float | None = Field(None, gt=0, description="lognormal: median (= exp(mu))")
    sigma: float | None = Field(None, gt=0, description="lognormal: sigma of log")
    shape: float | None = Field(None, gt=0, description="weibull: shape k")
    scale: float | None = Field(None, gt=0, description="weibull: scale lambda")
    values: tuple[float, ...] | None = Field(None, min_length=1, description="choice: the values")
    weights: tuple[float, ...] | None = Field(None, description="choice: relative weights (default equal)")
    file: str | None = Field(None, description="empirical: CSV with a header, one value per row "
                                                "(e.g. the Philly runtime trace); relative to the scenario")
    column: str | None = Field(None, description="empirical: column to read (default the first)")
    multiply: float = Field(1.0, gt=0, description="empirical: factor applied to each value (unit change)")
    min: float | None = Field(None, ge=0, description="clip below")
    max: float | None = Field(None, gt=0, description="clip above")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return {"dist": "fixed", "value": data}
        if isinstance(data, list):
            return {"dist": "choice", "values": data}
        return data

    @model_validator(mode="after")
    def _needs(self) -> Dist:
        need = {"fixed": ("value",), "uniform": ("low", "high"), "exponential": ("mean",),
                "lognormal": ("median", "sigma"), "weibull": ("shape", "scale"), "choice": ("values",),
                "empirical": ("file",)}[self.dist]
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"dist {self.dist} needs {', '.join(missing)}")
        if self.dist == "uniform" and self.low is not None and self.high is not None and self.low >= self.high:
            raise ValueError(f"uniform: low {self.low} must be below high {self.high}")
        if self.values is not None and any(v <= 0 for v in self.values):
            raise ValueError("choice: values must be > 0")
        if self.weights is not None:
            if self.values is None or len(self.weights) != len(self.values):
                raise ValueError("choice: one weight per value")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("choice: weights must be >= 0 with a positive sum")
        return self


class Arrivals(Strict):
    """When jobs arrive: a Poisson process (optionally with a daily cycle), fixed gaps, or all at once."""
    process: Literal["poisson", "fixed", "once"] = "poisson"
    per_day: float | None = Field(None, gt=0, description="poisson/fixed: mean arrivals per day")
    # Bounded before anything is allocated (fuzz case 49194: 2^31 arrivals asked for 16 GiB); the
    # simulator's speed benchmark runs 100,000 jobs.
    count: int | None = Field(None, ge=0, le=MAX_ARRIVALS,
                              description="stop after this many (once: how many at start_hours)")
    start_hours: float = Field(0.0, ge=0, description="first possible arrival")
    end_hours: float | None = Field(None, gt=0, description="no arrivals after this (default: the horizon)")
    diurnal_amplitude: float = Field(0.0, ge=0, le=1, description="poisson: rate x (1 + a cos(2 pi (h - peak)/24))")
    peak_hour: float = Field(14.0, ge=0, lt=24, description="hour of day with the most arrivals")

    @model_validator(mode="after")
    def _needs(self) -> Arrivals:
        if self.process in ("poisson", "fixed") and self.per_day is None:
            raise ValueError(f"process {self.process} needs per_day")
        if self.process == "once" and self.count is None:
            raise ValueError("process once needs count")
        return self


# Minutes of work between checkpoints. "No checkpoints" is the absent field (or null), never 0: a
# 0-minute interval is not a schedule, and 0 was a silent accept (issue 23). At most the 10-year horizon.
CHECKPOINT_MAX_MIN: Final = 3650 * 24 * 60


def _checkpoint_minutes(v: float | None) -> float | None:
    if v is not None and not 0 < v <= CHECKPOINT_MAX_MIN:
        raise ValueError(f"must be in (0, {CHECKPOINT_MAX_MIN:,}] minutes; leave it out (or null) for no checkpoints")
    return v


CheckpointMinutes = Annotated[float | None, AfterValidator(_checkpoint_minutes)]


class _Workload(Strict):
    name: str = Field(min_length=1, description="class name; results are grouped by it")
    queue: str = Field("default", description="queue (Kueue ClusterQueue, static partition) the jobs go to")
    priority: int = Field(0, description="higher runs first where the policy has priorities")
    gpu_types: tuple[str, ...] | None = Field(None, min_length=1, description="allowed GPU types (default any; "
                                                                             "catalog names)")
    gpu_util: float = Field(1.0, gt=0, le=1, description="fraction of its GPU time a running job keeps the GPUs "
                                                         "computing (device busy vs allocated; Philly: ~0.5)")

    @field_validator("gpu_types")
    @classmethod
    def _known(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        from gpucluster.catalog import catalog
        return None if v is None else tuple(_canonical(catalog.gpus, t) for t in v)


class Training(_Workload):
    """Distributed training jobs: gangs that checkpoint and restart from the last checkpoint."""
    kind: Literal["training"]
    arrivals: Arrivals
    gpus: Dist = Field(description="GPUs per job (rounded to whole GPUs)")
    duration_hours: Dist | None = Field(None, description="work per job on the reference GPU type, hours")
    model: str | None = Field(None, description="instead of duration: a model preset or file; the training "
                                                 "planner gives the step time on each GPU type")
    tokens: str | None = Field(None, description="with model: tokens per job, e.g. 20B")
    global_batch: int | None = Field(None, ge=1, description="with model: sequences per step (default ~4M tokens)")
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    reference_gpu: str | None = Field(None, description="GPU type duration_hours refers to (default: the "
                                                        "first pool's)")
    job_type: str | None = Field(None, description="with duration_hours: a job type of the throughput table "
                                                   "(e.g. Gavel's 'ResNet-50 (batch size 64)'); its steps/s on "
                                                   "each GPU type give the speeds")
    throughputs: str | None = Field(None, description="with job_type: the throughput table (Gavel's JSON), "
                                                      "relative to the scenario")
    checkpoint_minutes: CheckpointMinutes = Field(None, description="work between checkpoints, minutes; absent "
                                                                    "or null = no checkpoints")
    checkpoint_write_s: float = Field(0.0, ge=0, description="time to write one checkpoint, s")
    restart_s: float = Field(0.0, ge=0, description="time to reload and resume after a restart, s")
    max_retries: int = Field(1000, ge=0, description="restarts before the job counts as failed")

    @model_validator(mode="after")
    def _duration(self) -> Training:
        if (self.duration_hours is None) == (self.model is None):
            raise ValueError("give duration_hours or model (with tokens), not both")
        if self.model is not None and self.tokens is None:
            raise ValueError("model needs tokens (e.g. tokens: 20B)")
        if (self.job_type is None) != (self.throughputs is None) or (self.job_type and self.model):
            raise ValueError("job_type and throughputs go together, with duration_hours (not model)")
        return self


class Batch(_Workload):
    """Arrays of independent 1-GPU (or few-GPU) tasks, e.g. molecular dynamics."""
    kind: Literal["batch"]
    arrivals: Arrivals = Field(description="arrivals of whole arrays")
    tasks: Dist = Field(description="tasks per array")
    gpus_per_task: int = Field(1, ge=1)
    task_hours: Dist = Field(description="duration of one task, hours")
    max_retries: int = Field(3, ge=0, description="reruns of a task killed by a failure")


class RateCurve(Strict):
    """Requests per second over time: constant, a daily sine, or points (hour, rps) interpolated."""
    kind: Literal["constant", "diurnal", "points"] = "diurnal"
    mean_rps: float | None = Field(None, gt=0)
    amplitude: float = Field(0.5, ge=0, le=1, description="diurnal: peak = mean x (1 + amplitude)")
    peak_hour: float = Field(14.0, ge=0, lt=24)
    points: tuple[tuple[float, float], ...] | None = Field(None, min_length=1, description="points: [hour, rps]")
    period_hours: float | None = Field(None, gt=0, description="points: repeat with this period")

    @model_validator(mode="after")
    def _needs(self) -> RateCurve:
        if self.kind == "points" and not self.points:
            raise ValueError("kind points needs points")
        if self.kind != "points" and self.mean_rps is None:
            raise ValueError(f"kind {self.kind} needs mean_rps")
        return self


class Inference(_Workload):
    """An inference service: replicas autoscaled on a request-rate curve."""
    kind: Literal["inference"]
    gpus_per_replica: int = Field(1, ge=1)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(ge=1)
    replica_rps: float = Field(gt=0, description="requests/s one replica serves within its latency SLO")
    target_utilization: float = Field(0.7, gt=0, le=1, description="autoscaler target load per replica")
    rate: RateCurve
    autoscale_s: float = Field(60.0, gt=0, description="autoscaler period, s")
    cold_start_s: float = Field(120.0, ge=0, description="a new replica serves after this (model load), s")
    start_hours: float = Field(0.0, ge=0)
    end_hours: float | None = Field(None, gt=0, description="default: the horizon")
    priority: int = 100

    @model_validator(mode="after")
    def _bounds(self) -> Inference:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        return self


class Pipeline(_Workload):
    """Data or video pipelines whose speed is bound by a shared storage tier."""
    kind: Literal["pipeline"]
    arrivals: Arrivals
    gpus: Dist = Field(description="GPUs per job")
    data_tb: Dist = Field(description="data each job reads, TB (1e12 bytes)")
    tier: str = Field(description="storage tier of the cluster spec the data is read from")
    gbps_per_gpu: float = Field(gt=0, description="GB/s one GPU consumes when storage keeps up")


class Trace(_Workload):
    """Jobs read from a trace file (see `gpucluster simulate --help` for the formats)."""
    kind: Literal["trace"]
    format: str = Field(description="sacct, openb, philly, gavel")
    path: str = Field(description="trace file, relative to the scenario")
    limit: int | None = Field(None, ge=1, description="read at most this many jobs")
    time_scale: float = Field(1.0, gt=0, description="multiply arrival times and durations")
    arrival_scale: float = Field(1.0, gt=0, description="multiply arrival times only (< 1: the same jobs "
                                                        "arrive faster, a heavier load)")
    hold: bool = Field(False, description="jobs never end (the fill experiments of the ATC'23 openb paper)")
    checkpoint_minutes: CheckpointMinutes = Field(None, description="as for training; absent or null = none")
    checkpoint_write_s: float = Field(0.0, ge=0)
    restart_s: float = Field(0.0, ge=0)
    arrivals: Arrivals | None = Field(None, description="for traces without arrival times (philly runtimes)")
    gpus: Dist | None = Field(None, description="for traces without GPU counts (philly runtimes; default 1)")
    runtimes: str | None = Field(None, description="gavel without a throughput table: Philly runtime CSV the step "
                                                   "counts are mapped onto by rank (an approximation)")
    throughputs: str | None = Field(None, description="gavel: throughput table (Gavel's JSON; run time = steps / "
                                                      "throughput on the GPU type; default: Gavel's 2019 table "
                                                      "beside the trace, ../gavel/oracle_throughputs_2019.json)")


Workload = Annotated[Training | Batch | Inference | Pipeline | Trace, Field(discriminator="kind")]


class Failures(Strict):
    """Node failures (exponential or Weibull times between failures per node) and repairs."""
    profile: str = Field("llama3", description="failure profile of the reliability model (per-cause rates; "
                                               "`gpucluster reliability` lists them)")
    per_gpu_hour: float | None = Field(None, gt=0, description="instead of the profile: failures per GPU-hour, "
                                                              "all taking the node out for repair")
    distribution: Literal["exponential", "weibull"] = "exponential"
    weibull_shape: float = Field(1.0, gt=0, description="k < 1: failures cluster early (infant mortality)")
    repair_hours: Dist | None = Field(None, description="time to repair a node after a hardware failure, hours "
                                                        "(default: the reliability data's node_repair_h)")
    drain_hours: float = Field(0.0, ge=0, description="health checks after repair before the node rejoins")

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        from gpucluster.catalog.operations import failure_profiles
        return _canonical(failure_profiles(), v)


class CloudBurst(Strict):
    """Rented nodes that start when jobs wait too long and stop when idle (spot or on-demand)."""
    gpu: str = Field(description="catalog GPU name; TYPE:COUNT sets gpus_per_node")
    gpus_per_node: int = Field(8, ge=1)
    max_nodes: int = Field(ge=1)
    usd_per_gpu_hour: float | None = Field(None, ge=0, description="default: the catalog's rental price")
    provision_minutes: float = Field(5.0, ge=0)
    after_wait_minutes: float = Field(30.0, ge=0, description="burst for jobs that waited longer")
    idle_release_minutes: float = Field(10.0, ge=0)
    interruptions_per_node_hour: float = Field(0.0, ge=0, description="spot reclaims per node-hour")

    @model_validator(mode="before")
    @classmethod
    def _skypilot(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("gpu"), str) and ":" in data["gpu"]:
            name, _, count = data["gpu"].partition(":")
            if not count.strip().isdigit() or int(count) < 1:
                raise ValueError(f"gpu: count in {data['gpu']!r} must be a positive integer")
            data = {**data, "gpu": name.strip(), "gpus_per_node": int(count)}
        return data

    @field_validator("gpu")
    @classmethod
    def _known(cls, v: str) -> str:
        from gpucluster.catalog import catalog
        return _canonical(catalog.gpus, v)


class FlavorQuota(Strict):
    """Kueue: a ClusterQueue's quota of one ResourceFlavor (here a GPU type), resource nvidia.com/gpu."""
    nominal_quota: int = Field(ge=0, description="GPUs of this flavor the queue is guaranteed (nominalQuota)")
    borrowing_limit: int | None = Field(None, ge=0, description="GPUs of this flavor it may borrow from its "
                                                                "cohort beyond nominal_quota (borrowingLimit; "
                                                                "default unlimited)")
    lending_limit: int | None = Field(None, ge=0, description="of its unused nominal quota, GPUs it lends to "
                                                              "the cohort (lendingLimit; default all)")


class KueuePreemption(Strict):
    """Kueue: whom a pending workload may preempt (ClusterQueue spec.preemption). The defaults differ
    from Kueue's (Never, Never) and keep this simulator's earlier behaviour."""
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Any", description="reclaimWithinCohort: preempt workloads of other queues of the cohort that borrow, "
                           "when the pending one fits in its own nominal quota")
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="withinClusterQueue: preempt lower-priority workloads of the same queue")


class FairSharing(Strict):
    """Kueue: fair sharing of the cohort's lendable quota (ClusterQueue spec.fairSharing)."""
    weight: float = Field(1.0, ge=0, description="a queue's borrowed share is divided by its weight (0: borrows "
                                                 "last)")


class Queue(Strict):
    """A queue's share: a Kueue ClusterQueue (nominal quota per flavor, cohort, borrowing, lending,
    preemption, fair sharing) or a static partition's size (`gpus`)."""
    gpus: int | None = Field(None, ge=0, description="nominal quota over any GPU type / static partition, GPUs")
    borrowing_limit: int | None = Field(None, ge=0, description="Kueue, with gpus: GPUs it may borrow "
                                                                "(default unlimited)")
    lending_limit: int | None = Field(None, ge=0, description="Kueue, with gpus: of its unused quota, GPUs "
                                                              "it lends (default all)")
    cohort: str = Field("default", min_length=1, description="Kueue cohort: queues of one cohort borrow each "
                                                             "other's unused quota")
    flavors: dict[str, FlavorQuota] | None = Field(None, min_length=1, description="Kueue: quota per "
                                                   "ResourceFlavor (a GPU type of the cluster), tried in this "
                                                   "order")
    preemption: KueuePreemption = Field(default_factory=KueuePreemption)
    fair_sharing: FairSharing | None = Field(None, description="Kueue fair sharing weight (turns fair sharing "
                                                               "on for the kueue policy)")
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        "BestEffortFIFO", description="Kueue: StrictFIFO blocks the queue behind a head that does not fit")
    # A Slurm partition (scontrol show partition): its node set and PriorityTier (docs/simulator.md,
    # "Calibrating the twin"); honoured by backfill and the policies built on it (multifactor).
    nodes: str | None = Field(None, description="Slurm partition: its nodes, a hostlist over the cluster's node "
                                                "names (gpu[01-04,09]; default: every node)")
    priority_tier: int | None = Field(None, ge=0, le=65533, description="Slurm partition: PriorityTier (jobs of "
                                      "a higher tier are scheduled before any of a lower one; Slurm default 1)")

    @field_validator("nodes")
    @classmethod
    def _hostlist(cls, v: str | None) -> str | None:
        from gpucluster.specs.hostlist import expand
        if v is not None:
            expand(v)   # its ValueError is the field's error
        return v

    @model_validator(mode="after")
    def _quota(self) -> Queue:
        slurm = self.nodes is not None or self.priority_tier is not None
        if (self.gpus is None) == (self.flavors is None) and not (slurm and self.gpus is None):
            raise ValueError("give gpus (a quota over any GPU type, or a partition's size) or flavors "
                             "(a quota per GPU type), not both; a Slurm partition may give nodes or "
                             "priority_tier instead")
        if self.flavors is not None and (self.borrowing_limit is not None or self.lending_limit is not None):
            raise ValueError("with flavors, borrowing_limit and lending_limit go inside each flavor")
        for name, fq in (self.flavors or {"gpus": FlavorQuota(nominal_quota=self.gpus or 0,
                                                              lending_limit=self.lending_limit)}).items():
            if fq.lending_limit is not None and fq.lending_limit > fq.nominal_quota:
                where = "lending_limit" if self.flavors is None else f"flavors.{name}.lending_limit"
                raise ValueError(f"{where} {fq.lending_limit} is above the nominal quota {fq.nominal_quota} "
                                 "(Kueue lends at most the nominal quota)")
        return self

    @property
    def total_gpus(self) -> int:
        """The nominal quota over all flavors (a static partition's size)."""
        return self.gpus if self.gpus is not None else sum(f.nominal_quota for f in (self.flavors or {}).values())


def _cluster_form(v: Any) -> str:
    """A string is a path, anything else the inline spec: so an inline spec's errors are its own
    (`cluster.node_pools[0].gpu: unknown GPU ...`), not `cluster.str: Input should be a valid string`."""
    return "path" if isinstance(v, str) else "inline"


class Scenario(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    cluster: Annotated[Annotated[str, Tag("path")] | Annotated[ClusterSpec, Tag("inline")],
                       Discriminator(_cluster_form)] | None = Field(
        None, description="cluster spec file (relative to this file) or the spec inline")
    nodes_csv: str | None = Field(None, description="instead of cluster: openb node list CSV")
    # At most 10 years either way: a horizon of 1e308 days simulated failures until the wall limit.
    horizon_days: float | None = Field(None, gt=0, le=3650, description="stop here; default: when all jobs have ended")
    max_days: float = Field(3650.0, gt=0, le=3650, description="safety stop without a horizon")
    seed: int = Field(0, ge=0, le=2**64 - 1, description="random seed (numpy takes non-negative seeds)")
    policy: str = "backfill"
    policy_options: dict[str, Any] = Field(default_factory=dict, description="options of the policy")
    queues: dict[str, Queue] = Field(default_factory=dict)
    hostnames: dict[str, str] = Field(default_factory=dict, description="node names of a pool, a Slurm hostlist "
                                      "in the pool's order (default <pool>-0000, <pool>-0001, ...)")
    failures: Failures | None = None
    cloud_burst: CloudBurst | None = None
    spread_slowdown: float = Field(0.05, ge=0, description="a gang runs 1 + s x (leaves used - leaves needed) "
                                                           "times slower (an estimate)")
    samples: int = Field(200, ge=2, le=100000, description="points of the utilisation time series")
    workloads: tuple[Workload, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _cluster(self) -> Scenario:
        if (self.cluster is None) == (self.nodes_csv is None):
            raise ValueError("give cluster (a spec file or inline spec) or nodes_csv, not both")
        names = [w.name for w in self.workloads]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate workload name {min(dup)!r}")
        return self


class LoadedScenario:
    """A validated scenario with its cluster and the folder relative paths start from."""
    def __init__(self, spec: Scenario, cluster: ClusterSpec | None, base: Path, source: str,
                 lines: dict) -> None:
        self.spec, self.cluster, self.base, self.source, self.lines = spec, cluster, base, source, lines

    def path(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else self.base / p

    def where(self, *loc: str | int) -> dict[str, Any]:
        """file/line/field of a key path, for UserError(**where(...))."""
        from gpucluster.specs.loader import format_loc, line_of
        return {"file": self.source, "line": line_of(tuple(loc), self.lines), "field": format_loc(tuple(loc))}


class _Located:
    """A ValidationError whose locations drop the workload kind pydantic puts after the index
    (`workloads[0].training.gpus` is `workloads[0].gpus` in the file) and the follow-on
    'too short' error of a list whose only item failed."""

    def __init__(self, exc: ValidationError) -> None:
        self.exc = exc

    def errors(self, **kw: Any) -> list[dict[str, Any]]:
        errs: list[dict[str, Any]] = []
        for e in self.exc.errors(**kw):
            loc = e["loc"]
            if len(loc) > 2 and loc[0] == "workloads" and isinstance(loc[1], int) and loc[2] in WORKLOAD_KINDS:
                loc = loc[:2] + loc[3:]
            if len(loc) > 1 and loc[0] == "cluster" and loc[1] in ("inline", "path"):
                loc = loc[:1] + loc[2:]
            errs.append({**e, "loc": loc})
        deeper = {e["loc"][0] for e in errs if len(e["loc"]) > 1}
        return [e for e in errs if not (e["type"] == "too_short" and len(e["loc"]) == 1 and e["loc"][0] in deeper)]


WORKLOAD_KINDS = ("training", "batch", "inference", "pipeline", "trace")


def load_scenario(path: str | Path) -> LoadedScenario:
    from gpucluster.specs.cluster import load_cluster
    from gpucluster.specs.loader import validation_error

    data, lines = load_yaml(path)
    if data is None:
        raise UserError("the file is empty", file=str(path))
    try:
        spec = Scenario.model_validate(data)
    except ValidationError as exc:
        raise validation_error(_Located(exc), str(path), lines) from None  # type: ignore[arg-type]
    base = Path(path).resolve().parent
    loaded = LoadedScenario(spec, None, base, str(path), lines)
    if isinstance(spec.cluster, str):
        p = loaded.path(spec.cluster)
        if not is_file(p):
            raise UserError(f"cluster spec not found: {p}", **loaded.where("cluster"))
        loaded.cluster = load_cluster(p)
    elif spec.cluster is not None:
        loaded.cluster = spec.cluster
    return loaded
