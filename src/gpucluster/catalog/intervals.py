"""The calibrated interval table (data/intervals.yaml), written by benchmarks/calibrate_intervals.py
from the leave-one-source-out errors of the public validation files. model/intervals.py turns
it into the intervals of training and serving predictions (model/uncertainty.py says how).

The table records where it comes from (files, commit, method); nothing here is fitted at
run time. Loaded on first use only, through the catalog's cache (no YAML parse at a `plan` start)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpucluster.catalog.cache import cached

PATH = Path(__file__).parent / "data" / "intervals.yaml"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first validation: not at a cached start


class Provenance(_M):
    method: str
    script: str
    files: list[str]
    commit: str
    generated: str


class ValidatedSets(_M):
    chips: list[str]
    frameworks: list[str]
    attention: list[str] = []
    gpus: list[int] | None = None
    seq_len: list[int] | None = None


class BandRow(_M):
    regime: dict[str, bool]
    lo: float = Field(gt=0)
    hi: float = Field(gt=0)
    cases: int
    sources: int


class Fallback(_M):
    lo: float = Field(gt=0, le=1)
    hi: float = Field(ge=1)
    why: str


class Bands(_M):
    quantity: str
    bands: list[BandRow]
    coverage: dict[str, Any] | None = None


class Part(_M):
    features: list[str]
    default_stack: str | None = Field(None, description="the framework (serving: engine) of the cases that state none; "
                                                        "a plan that states none is classed with them")
    validated: ValidatedSets
    fallback: Fallback


class TrainingPart(Part, Bands):
    pass


class ServingPart(Part):
    metrics: dict[str, Bands]


class IntervalTable(_M):
    schema_: Literal["gpucluster-intervals/v1"] = Field(alias="schema")
    level: float = Field(gt=0, lt=1)
    min_cases: int
    min_sources: int
    widen: float = Field(ge=1)
    widen_why: str
    source: Provenance
    training: TrainingPart
    serving: ServingPart


@cache
def table(path: Path = PATH) -> IntervalTable:
    # The cache keys on the data file and the catalog's own code; this module's models decide the
    # entry too, so their source is part of the family name (an edit here rebuilds the entry).
    import hashlib

    code = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=4).hexdigest()
    return cached(f"intervals-{code}", [path], lambda: _read(path))


def _read(path: Path) -> IntervalTable:
    from gpucluster.specs.loader import load_yaml, parse_data

    data, lines = load_yaml(path)
    return parse_data(IntervalTable, data, str(path), lines)


def calibrated_on(path: str | Path) -> bool:
    """Whether the table was calibrated on a file of this name (its coverage there is in-sample)."""
    return any(Path(f).name == Path(path).name for f in table().source.files)


