"""`gpucluster sweep --json`: schema gpucluster-sweep/v1, one result per grid point."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Strict

SCHEMA: Final = "gpucluster-sweep/v1"


class Task(Strict):
    OMIT_NONE = ("result", "error")

    params: dict[str, Any] = Field(description="the options of this grid point")
    ok: bool
    result: dict[str, Any] | None = Field(None, description="the kept fields (dotted name -> value), or the "
                                                              "whole document")
    error: str | None = Field(None, description="why the task failed (one line)")
    flags: list[str] = Field(default_factory=list, description="warnings of the whole result, whatever `keep` "
                                                               "kept: for plan train, an MFU above the best "
                                                               "published run (its above_best_published)")


class SweepDocument(Document):
    schema_: Literal["gpucluster-sweep/v1"] = Field(SCHEMA, alias="schema")
    name: str
    engine: str
    tasks: list[Task]
    ok: int
    failed: int
    ray_nodes: int | None
