"""`gpucluster simulate --json` (schema gpucluster-simulation/v1) and `simulate compare --json`
(gpucluster-simulation-compare/v1).

The simulator grows (policies, trace readers and schedulers add what they measure), so this
model types the keys every run has and keeps the others as they come: extra keys are allowed
at the top level and inside every nested object. A key added by the simulator appears in the
JSON at once; document it here when it settles."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Open

SCHEMA: Final = "gpucluster-simulation/v1"
COMPARE_SCHEMA: Final = "gpucluster-simulation-compare/v1"


class Cluster(Open):
    gpus: int
    nodes: int
    types: dict[str, int] = Field(description="GPU type -> GPUs on premises")
    cloud_gpus_max: int


class Jobs(Open):
    total: int
    completed: int
    failed: int
    cancelled: int
    running: int
    pending: int
    not_run: dict[str, int] = Field(description="why jobs failed or were cancelled -> how many")


class Utilization(Open):
    allocation: Num | None
    busy: Num | None


class ScenarioWarning(Open):
    code: str = Field(description="larger_than_cluster, no_gpu_type, larger_than_partition, larger_than_quota, "
                                  "queue_without_quota")
    workload: str
    field: str = Field(description="the scenario field to change, e.g. workloads[0].gpus")
    jobs: int
    message: str


class SimulationDocument(Open, Document):
    model_config = Open.model_config
    OMIT_NONE = ("failures", "services", "recorded_waits")

    schema_: Literal["gpucluster-simulation/v1"] = Field(SCHEMA, alias="schema")
    scenario: str
    policy: str
    seed: int | None
    partial: bool
    simulated_days: Num
    wall_s: Num
    events: int
    events_per_s: Num | None
    cluster: Cluster
    jobs: Jobs
    utilization: Utilization
    gpu_hours: dict[str, Num] = Field(description="GPU-hours by what they went to: useful, checkpoint, restart "
                                                  "(reloads after failures), restart_preemption (reloads after "
                                                  "preemptions, round-based moves, spot reclaims), lost_failures, "
                                                  "lost_preemption; they add up to utilization.allocated_gpu_hours")
    work_reference_gpu_hours: Num
    goodput: Num | None
    makespan_s: Num | None
    classes: dict[str, dict[str, Any]] = Field(
        description="job class -> counts, wait_s (submit to first start), queued_s (all time waiting, preempted "
                    "spells included), jct_s, gpu_hours, restarts, preemptions, restart_gpu_hours, "
                    "restart_preemption_gpu_hours")
    recorded_waits: dict[str, Any] | None = Field(
        None, description="a replayed Slurm history: simulated against recorded waits (p50, p90) per partition and "
                          "over all (sim/calibration.py)")
    failures: dict[str, Any] | None = Field(None, description="with failures in the scenario")
    services: dict[str, dict[str, Any]] | None = Field(None, description="inference services, by name")
    fragmentation: dict[str, Any]
    cost: dict[str, Any]
    timeseries: dict[str, list[Num]] = Field(description="t_hours and one series per measure, as long")
    traces: list[Any]
    notes: list[str]
    warnings: list[ScenarioWarning] = Field(default_factory=list, description="jobs the scenario sends that can "
                                            "never run here (sim/scenario_checks.py)")


class SimulationCompareDocument(Open, Document):
    model_config = Open.model_config

    schema_: Literal["gpucluster-simulation-compare/v1"] = Field(COMPARE_SCHEMA, alias="schema")
    scenario: str
    partial: bool
    policies: dict[str, SimulationDocument] = Field(description="policy -> its run, as `simulate --json` prints it")
