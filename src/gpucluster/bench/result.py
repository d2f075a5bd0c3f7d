"""The `gpucluster bench collective --json` document (schema gpucluster-bench-collective/v1) as
read back by `diagnose` and `metrics`: checked field by field before any number is used, so a
hand-edited or truncated file gives one line naming the field, never a traceback."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpucluster.errors import UserError

SCHEMA = "gpucluster-bench-collective/v1"
MAX_ROWS = 4096          # nccl-tests sweeps have tens of sizes; more is not a benchmark result
MAX_RANKS = 1 << 20


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


class _Loose(BaseModel):
    """Results carry more fields than are read here; those are kept, not refused."""
    model_config = ConfigDict(extra="allow", frozen=True)


class Figures(_Loose):
    time_us: float = Field(ge=0)
    algbw_gbps: float = Field(ge=0)
    busbw_gbps: float = Field(ge=0)
    wrong: int = Field(0, ge=0)

    _finite = field_validator("time_us", "algbw_gbps", "busbw_gbps")(_finite)


class Row(Figures):
    size_bytes: int = Field(ge=0)
    placement: Literal["in-place", "out-of-place"] | None = None
    in_place: Figures | None = None


class BaselineRow(_Loose):
    size_bytes: int = Field(ge=0)
    busbw_gbps: float = Field(ge=0)

    _finite = field_validator("busbw_gbps")(_finite)


class Baseline(_Loose):
    kind: str = "loopback"
    what: str = ""
    error: str | None = None
    rows: list[BaselineRow] = Field(default_factory=list, max_length=MAX_ROWS)


class CollectiveResult(_Loose):
    schema_: Literal["gpucluster-bench-collective/v1"] = Field(alias="schema")
    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]
    backend: str = ""
    world_size: int = Field(ge=1, le=MAX_RANKS)
    nodes: int = Field(1, ge=1, le=MAX_RANKS)
    node_ranks: dict[str, list[int]] = Field(default_factory=dict)
    wrong_total: int = Field(0, ge=0)
    rows: list[Row] = Field(min_length=1, max_length=MAX_ROWS)
    baseline: Baseline | None = None


def read_collective(doc: Any, source: str) -> CollectiveResult:
    """The result in `doc` (parsed JSON from `source`), or a UserError naming the field."""
    from gpucluster.specs.loader import parse_data

    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UserError("not a `gpucluster bench collective --json` result (schema "
                        f"{SCHEMA!r} expected)", file=source)
    res = parse_data(CollectiveResult, doc, source)
    if res.nodes > res.world_size:
        raise UserError(f"{res.nodes} nodes for {res.world_size} ranks", file=source, field="nodes")
    return res
