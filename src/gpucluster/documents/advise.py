"""`gpucluster advise --json`: schema gpucluster-advise/v1, the ladder from one GPU to a cluster."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-advise/v1"


class Rung(Strict):
    label: str
    kind: str
    gpus: int
    nodes: int
    fits: bool
    reason: str
    time_s: Num | None
    mtbf_s: Num | None
    gpu_hours: Num | None
    layout: str
    meets_deadline: bool | None
    confidence: str | None
    assumptions: list[str]


class BuildOrRent(Strict):
    rent_usd_per_gpu_hour: Num | None
    rent_origin: str
    run_rent_usd: Num | None
    capex_usd: Num
    opex_usd_per_month: Num
    break_even_months: Num | None
    horizon_months: Num
    utilization: Num
    build_total_usd: Num
    rent_total_usd: Num | None
    answer: str
    assumptions: list[str]


class ServingPick(Strict):
    hardware: str
    replicas: int
    processors: int
    usd_per_mtok_rented: Num | None
    usd_per_mtok_owned: Num | None
    ttft_p99_s: Num | None


class Serving(Strict):
    OMIT_NONE = ("gpu", "cpu")

    rate: Num
    input_tokens: int
    output_tokens: int
    gpu: ServingPick | None = None
    cpu: ServingPick | None = None


class AdviseDocument(Document):
    OMIT_NONE = ("build_or_rent", "serving")

    schema_: Literal["gpucluster-advise/v1"] = Field(SCHEMA, alias="schema")
    model: str | None
    tokens: int
    tokens_source: str
    deadline_s: Num
    deadline_source: str
    rungs: list[Rung]
    answer: str | None
    build_or_rent: BuildOrRent | None = None
    serving: Serving | None = None
