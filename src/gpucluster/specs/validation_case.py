"""The `gpucluster-validation/v1` file format (see shared/validation/README.md).

Only the structure is strict here (schema tag, a list of cases with unique ids
and a kind); the physics sections are parsed per kind when a case is
predicted, so that a case the model cannot handle yet gets a reason instead of
stopping the whole file.
"""

from __future__ import annotations

import math

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

SCHEMA_TAG = "gpucluster-validation/v1"


class ScaleOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["infiniband", "roce", "ethernet"]
    gbps_per_nic: float = Field(gt=0, description="line rate of one NIC, Gbit/s")
    nics_per_node: PositiveInt


class Hardware(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu: str
    gpus: PositiveInt
    gpus_per_node: PositiveInt
    scale_out: ScaleOut | None = None
    scale_up_domain: PositiveInt | None = Field(None, description="GPUs per NVLink domain; default gpus_per_node")
    power_cap_w: PositiveFloat | None = Field(
        None, description="board power limit per GPU (nvidia-smi -pl), at most the TDP; default: none (TDP)")

    @property
    def domain(self) -> int:
        return self.scale_up_domain or self.gpus_per_node


class Collective(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: str
    bytes: PositiveInt
    gpus: PositiveInt
    gpus_per_node: PositiveInt | None = None


class Case(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    kind: str
    source: str | None = None
    hardware: dict[str, Any] | None = None
    measured: dict[str, float]
    notes: str | None = None

    @field_validator("measured")
    @classmethod
    def _measured_not_empty(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("needs at least one measured metric")
        for k, x in v.items():
            if not (math.isfinite(x) and x > 0):   # NaN passed `x <= 0` and validated as exit 0
                raise ValueError(f"{k} must be a finite number > 0, got {x}")
        return v


class ValidationFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_: Literal["gpucluster-validation/v1"] = Field(alias="schema")
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> ValidationFile:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"duplicate case id {case.id!r}")
            seen.add(case.id)
        return self
