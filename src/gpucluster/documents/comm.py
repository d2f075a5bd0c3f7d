"""`gpucluster comm --json`: schema gpucluster-comm/v1, the nccl-tests table a healthy cluster
should print."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-comm/v1"


class Row(Strict):
    """One nccl-tests line (model, not measurement)."""
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: Num
    algbw_gbps: Num
    busbw_gbps: Num
    wrong: int
    algorithm: str
    bottleneck: str


class CommDocument(Document):
    schema_: Literal["gpucluster-comm/v1"] = Field(SCHEMA, alias="schema")
    op: str
    gpus: int
    placement: dict[str, Any] = Field(description="where the group sits: GPU, domains, scale-up and scale-out links")
    algorithm: str
    rows: list[Row]
    avg_busbw_gbps: Num
