"""`gpucluster reliability --json`: schema gpucluster-reliability/v1."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-reliability/v1"


class MtbfRow(Strict):
    gpus: int
    nodes: int
    mtbf_h: Num


class SeedClaim(Strict):
    nodes: int
    seed_mtbf_h: Num
    model_mtbf_h: Num
    seed_says_more_often_by: Num


class Cause(Strict):
    name: str
    component: str
    per: str
    rate_per_unit_hour: Num
    source: str


class CheckpointOption(Strict):
    """One checkpoint tier: Young's and Daly's interval and the goodput at Daly's; with
    --interval, the given interval's too."""
    OMIT_NONE = ("given_interval_s", "given_goodput", "given_lost_work_per_failure_s")

    tier: str
    write_s: Num
    copy_s: Num
    read_s: Num
    durable: bool
    limit: str
    young_s: Num
    daly_s: Num
    lost_work_per_failure_s: Num
    goodput: Num
    given_interval_s: Num | None = None
    given_goodput: Num | None = None
    given_lost_work_per_failure_s: Num | None = None


class Spares(Strict):
    nodes_down_mean: Num
    spare_nodes: int
    quantile: Num
    repair_h: Num


class Job(Strict):
    """With a cluster: the job's interruptions, checkpoint options and spares."""
    cluster: str
    model: str | None
    gpus: int
    nodes: int
    interruptions_per_day: Num
    mtbf_s: Num
    by_component_per_day: dict[str, Num]
    checkpoint_bytes: Num
    options: list[CheckpointOption]
    best: str
    spares: Spares
    assumptions: list[str]


class ReliabilityDocument(Document):
    OMIT_NONE = ("job",)

    schema_: Literal["gpucluster-reliability/v1"] = Field(SCHEMA, alias="schema")
    profile: str
    description: str
    mtbf_by_gpus: list[MtbfRow]
    seed_claims: list[SeedClaim]
    causes: list[Cause]
    job: Job | None = None
