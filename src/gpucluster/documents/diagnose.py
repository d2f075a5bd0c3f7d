"""`gpucluster diagnose --json`: schema gpucluster-diagnose/v1, measured against expected per tier."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-diagnose/v1"


class Tier(Strict):
    tier: str
    where: str
    link: str
    source: str
    op: str
    ranks: int
    nodes: int
    sizes: list[int]
    measured_busbw_gbps: list[Num]
    expected_busbw_gbps: list[Num]
    baseline_busbw_gbps: list[Num] | None
    compared_busbw_gbps: list[Num]
    compared: str
    ratio: Num
    judged_ratio: Num
    judged: bool
    host_bound: bool
    bottleneck: bool
    text: str
    notes: list[str]


class DiagnoseDocument(Document):
    schema_: Literal["gpucluster-diagnose/v1"] = Field(SCHEMA, alias="schema")
    cluster: str
    threshold: Num
    tiers: list[Tier]
    bottleneck: Tier | None = Field(description="the first tier below the threshold, or null")
