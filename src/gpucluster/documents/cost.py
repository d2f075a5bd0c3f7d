"""`gpucluster cost --json`: schema gpucluster-cost/v1, build against rent."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-cost/v1"


class Item(Strict):
    category: str
    name: str
    quantity: Num
    unit_usd: Num
    total_usd: Num
    origin: str


class Rent(Strict):
    option: str
    usd_per_gpu_hour: Num
    usd_per_year: Num
    tco_usd: Num
    break_even_months: Num | None = Field(description="null: renting stays cheaper")
    origin: str


class TrainingRun(Strict):
    """With --model: one training run, rented (on demand) against owned."""
    model: str | None
    tokens: int
    gpu_hours: Num
    goodput: Num
    wall_s: Num
    rent_usd: Num
    build_usd: Num


class Serving(Strict):
    """With --serve-tokens-per-s: dollars per million tokens, rented against owned."""
    gpus: int
    tokens_per_s: Num
    rent_usd_per_million_tokens: Num
    build_usd_per_million_tokens: Num


class CostDocument(Document):
    OMIT_NONE = ("training_run", "serving")

    schema_: Literal["gpucluster-cost/v1"] = Field(SCHEMA, alias="schema")
    cluster: str
    gpus: int
    years: Num
    utilization: Num
    capex_usd: Num
    opex_usd_per_year: Num
    tco_usd: Num
    build_usd_per_gpu_hour_used: Num
    capex: list[Item]
    opex_per_year: list[Item]
    rent: list[Rent]
    it_kw: Num
    assumptions: list[str]
    training_run: TrainingRun | None = None
    serving: Serving | None = None
