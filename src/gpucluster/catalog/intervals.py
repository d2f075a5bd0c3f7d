"""The calibrated interval table (data/intervals.yaml), written by benchmarks/calibrate_intervals.py
from the leave-one-source-out errors of the public validation files, and the intervals of
training and serving predictions it gives (model/uncertainty.py says how).

The table records where it comes from (files, commit, method); nothing here is fitted at
run time. Loaded on first use only, so `plan` start-up does not pay for it."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpucluster.model.regime import (DEFAULT_ENGINE, DEFAULT_FRAMEWORK, SERVING_FEATURES, TRAINING_FEATURES, Validated,
                                     attention_name, chip_key, serving_features, training_features)
from gpucluster.model.uncertainty import Band, Interval, interval

PATH = Path(__file__).parent / "data" / "intervals.yaml"
SERVING_METRICS = ("throughput", "ttft", "tpot")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


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

    def sets(self) -> Validated:
        return Validated(frozenset(self.chips), frozenset(self.frameworks), frozenset(self.attention),
                         tuple(self.gpus) if self.gpus else None,  # type: ignore[arg-type]
                         tuple(self.seq_len) if self.seq_len else None)  # type: ignore[arg-type]


class BandRow(_M):
    regime: dict[str, bool]
    lo: float = Field(gt=0)
    hi: float = Field(gt=0)
    cases: int
    sources: int

    def band(self) -> Band:
        return Band(self.regime, self.lo, self.hi, self.cases, self.sources)


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
    from gpucluster.specs.loader import load_yaml, parse_data

    data, lines = load_yaml(path)
    return parse_data(IntervalTable, data, str(path), lines)


def _fallback(part: Part) -> tuple[float, float]:
    return part.fallback.lo, part.fallback.hi


def training_point(gpu: str, precision: str, *, framework: str | None, attention: str | None, fused: bool,
                   gpus: int, seq_len: int, moe: bool) -> dict[str, Any]:
    return {"chip": chip_key(gpu, precision), "framework": framework or DEFAULT_FRAMEWORK,
            "attention": attention_name(attention, fused), "gpus": gpus, "seq_len": seq_len, "moe": moe}


def training_interval(step_s: float, point: dict[str, Any], rate: bool = False) -> Interval:
    """The interval of a predicted step time (or, rate=True, of a throughput) at this point."""
    t = table()
    part = t.training
    feats = training_features(point, part.validated.sets())
    return interval(step_s, [b.band() for b in part.bands], feats, TRAINING_FEATURES, widen=t.widen,
                    fallback=_fallback(part), level=t.level, rate=rate)


def serving_point(gpu: str, *, engine: str | None, moe: bool) -> dict[str, Any]:
    return {"chip": gpu, "framework": engine or DEFAULT_ENGINE, "moe": moe}


def serving_interval(value: float, metric: Literal["throughput", "ttft", "tpot"], point: dict[str, Any],
                     rate: bool = False) -> Interval:
    """The interval of a serving figure: metric names whose residuals set it (a throughput's with
    rate=True; a cost per token scales as the time per token: metric throughput, rate=False)."""
    t = table()
    part = t.serving
    feats = serving_features(point, part.validated.sets())
    rows = part.metrics[metric].bands or (part.metrics["throughput"].bands if metric == "tpot" else [])
    return interval(value, [b.band() for b in rows], feats, SERVING_FEATURES, widen=t.widen,
                    fallback=_fallback(part), level=t.level, rate=rate)


def _get(section: Any, name: str) -> Any:
    """A field of a case section that may be a dict or a model (stacks add fields over time)."""
    if section is None:
        return None
    return section.get(name) if isinstance(section, dict) else getattr(section, name, None)


def case_point(case: Any) -> dict[str, Any]:
    """The regime description of a validation case (training or inference), from its stated
    fields only (never its source or notes): chip, stack, attention kernel, scale, MoE."""
    from gpucluster.catalog import catalog

    model, hw = getattr(case, "model", None) or {}, case.hardware or {}
    gpu = catalog.gpus.get(hw["gpu"]).name
    moe = (_get(model, "experts") or 1) > 1
    if case.kind == "training":
        tr = getattr(case, "training", None) or {}
        return training_point(gpu, _get(tr, "precision") or "bf16", framework=_get(tr, "framework"),
                              attention=_get(tr, "attention"), fused=True, gpus=hw["gpus"],
                              seq_len=_get(model, "seq_len") or 0, moe=moe)
    return serving_point(gpu, engine=_get(getattr(case, "serving", None), "engine"), moe=moe)


def calibrated_on(path: str | Path) -> bool:
    """Whether the table was calibrated on a file of this name (its coverage there is in-sample)."""
    return any(Path(f).name == Path(path).name for f in table().source.files)


# What each validated metric is, for its interval: (table part, metric group, a rate?)
CASE_METRICS: dict[str, tuple[str, str, bool]] = {
    "iteration_s": ("training", "step", False), "tflops_per_gpu": ("training", "step", True),
    "tokens_per_s_per_gpu": ("training", "step", True), "mfu": ("training", "step", True),
    "tokens_per_s": ("serving", "throughput", True), "latency_s": ("serving", "throughput", False),
    "ttft_s": ("serving", "ttft", False), "tpot_s": ("serving", "tpot", False)}


def case_interval(case: Any, metric: str, predicted: float) -> Interval | None:
    """The interval of a validation case's predicted metric (None: a kind or metric without one)."""
    if case.kind not in ("training", "inference"):
        return None
    key = metric
    if case.kind == "inference" and metric == "tokens_per_s_per_gpu":
        key = "tokens_per_s"
    part, group, rate = CASE_METRICS.get(key, ("", "", False))
    if (part == "training") != (case.kind == "training") or not part:
        return None
    point = case_point(case)
    if part == "training":
        return training_interval(predicted, point, rate=rate)
    return serving_interval(predicted, group, point, rate=rate)  # type: ignore[arg-type]


__all__ = ["SERVING_METRICS", "IntervalTable", "case_interval", "case_point", "serving_interval", "serving_point",
           "table", "training_interval", "training_point"]
