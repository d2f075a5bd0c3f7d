"""`gpucluster validate --json`: schema gpucluster-validate/v1, the model against published
measurements."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-validate/v1"


class Case(Strict):
    OMIT_NONE = ("reason", "interval", "covered", "defaults")

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
    interval: list[Num] | None = Field(None, description="[lo, hi]: the prediction's calibrated interval "
                                                         "(catalog/data/intervals.yaml); absent for kinds without one")
    covered: bool | None = Field(None, description="the measured value lies inside the interval")
    interval_in_sample: bool = Field(False, description="the interval table was calibrated on this file's cases")
    defaults: list[str] | None = Field(None, description="documented defaults taken for stack settings the case "
                                                         "does not state (framework, attention kernel, FLOPs count)")


class Coverage(Strict):
    """How often the measured value lies inside the prediction's interval."""
    with_interval: int = Field(0, description="predictions that carry an interval")
    covered: int = 0
    coverage: Num | None = Field(None, description="covered / with_interval (target: the table's level, 0.8)")
    median_half_width: Num | None = Field(None, description="median of (hi - lo) / 2 / predicted")
    interval_in_sample: int = Field(0, description="intervals calibrated on these very cases (their coverage is "
                                                   "in-sample; docs/validation.md has the cross-validated one)")


class KindSummary(Coverage):
    cases: int
    predicted: int
    in_sample: int = Field(0, description="predictions of runs the catalog was fitted on")
    median_abs_error: Num | None
    mean_abs_error: Num | None
    max_abs_error: Num | None
    mean_speed_bias: Num | None = Field(None, description="mean of predicted speed / measured - 1 (a time metric's "
                                                          "error flipped): + the model predicts faster than measured")


class ValidateDocument(Document):
    schema_: Literal["gpucluster-validate/v1"] = Field(SCHEMA, alias="schema")
    cases: list[Case]
    summary: dict[str, KindSummary] = Field(description="kind (training, inference) -> errors and interval coverage")
    coverage: dict[str, Coverage] = Field(default_factory=dict,
                                          description="'FILE KIND' -> interval coverage of that file's cases of that kind")
