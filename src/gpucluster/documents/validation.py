"""`gpucluster validate --json`: schema gpucluster-validate/v1, the model against published
measurements."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-validate/v1"


class Case(Strict):
    OMIT_NONE = ("reason", "defaults")

    id: str
    kind: str
    metric: str
    measured: Num
    predicted: Num | None
    error: Num | None = Field(description="(predicted - measured) / measured")
    source: str | None
    file: str | None
    reason: str | None = Field(None, description="why no prediction (the case is outside the model)")
    in_sample: bool = Field(False, description="the GPU's efficiency was fitted on this file's runs (catalog fitted_on)")
    defaults: list[str] | None = Field(None, description="documented defaults taken for stack settings the case "
                                                         "does not state (framework, attention kernel, FLOPs count)")


class KindSummary(Strict):
    cases: int
    predicted: int
    in_sample: int = Field(0, description="predictions of runs the catalog was fitted on")
    median_abs_error: Num | None
    mean_abs_error: Num | None
    max_abs_error: Num | None


class ValidateDocument(Document):
    schema_: Literal["gpucluster-validate/v1"] = Field(SCHEMA, alias="schema")
    cases: list[Case]
    summary: dict[str, KindSummary] = Field(description="kind (training, inference) -> errors")
