"""`gpucluster facility --json`: schema gpucluster-facility/v1, power, feed and cooling."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Open, Strict

SCHEMA: Final = "gpucluster-facility/v1"


class Rack(Open):
    """One pool's racks (model/facility.py RackReport, field by field, with three derived values)."""
    pool: str
    node: dict[str, Any] = Field(description="watts per node by part, with provenance")
    nodes_per_rack: int
    racks: int
    rack_kw: Num
    budget_kw: Num | None
    nodes_that_fit: int
    amps_per_phase: Num
    circuit_kw: Num
    circuits: int
    circuits_at_480v_3ph: int
    cooling: str
    air_limit_kw: Num
    node_kw: Num
    over_budget: bool
    air_too_dense: bool


class StorageTier(Strict):
    tier: str
    kind: str
    read_gbps: Num
    write_gbps: Num
    input_share: Num
    checkpoint_write_s: Num
    daly_interval_s: Num
    write_share: Num


class Storage(Strict):
    """With --model: what storage must deliver to feed the GPUs and absorb checkpoints."""
    model: str | None
    gpus: int
    input_gbps: Num
    input_basis: str
    checkpoint_tb: Num
    mtbf_s: Num
    tiers: list[StorageTier]


class FacilityDocument(Document):
    OMIT_NONE = ("storage",)

    schema_: Literal["gpucluster-facility/v1"] = Field(SCHEMA, alias="schema")
    cluster: str
    voltage_v: Num
    phases: int
    it_kw: Num
    facility_kw: Num
    pue: Num
    switches_kw: Num
    racks: list[Rack]
    provenance: list[str]
    storage: Storage | None = None
