"""The calibrated intervals of training and serving predictions: the regime a prediction falls
in (model/regime.py) looked up in the calibrated table (catalog/data/intervals.yaml, read by
catalog/intervals.py), as model/uncertainty.py describes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from gpucluster.catalog.intervals import Part, table
from gpucluster.model.regime import (DEFAULT_ENGINE, DEFAULT_FRAMEWORK, SERVING_FEATURES, TRAINING_FEATURES, Validated,
                                     attention_name, chip_key, serving_features, training_features)
from gpucluster.model.uncertainty import Band, Interval, interval

SERVING_METRICS = ("throughput", "ttft", "tpot")


def _validated(part: Part) -> Validated:
    v = part.validated
    return Validated(frozenset(v.chips), frozenset(v.frameworks), frozenset(v.attention),
                     (v.gpus[0], v.gpus[1]) if v.gpus else None, (v.seq_len[0], v.seq_len[1]) if v.seq_len else None)


def _bands(rows: list[Any]) -> list[Band]:
    return [Band(r.regime, r.lo, r.hi, r.cases, r.sources) for r in rows]


def _fallback(part: Part) -> tuple[float, float]:
    return part.fallback.lo, part.fallback.hi


def training_point(gpu: str, precision: str, *, framework: str | None, attention: str | None, fused: bool,
                   gpus: int, seq_len: int, moe: bool) -> dict[str, Any]:
    return {"chip": chip_key(gpu, precision), "framework": framework or table().training.default_stack or DEFAULT_FRAMEWORK,
            "attention": attention_name(attention, fused), "gpus": gpus, "seq_len": seq_len, "moe": moe}


def training_interval(step_s: float, point: dict[str, Any], rate: bool = False) -> Interval:
    """The interval of a predicted step time (or, rate=True, of a throughput) at this point."""
    t = table()
    part = t.training
    feats = training_features(point, _validated(part))
    return interval(step_s, _bands(part.bands), feats, TRAINING_FEATURES, widen=t.widen,
                    fallback=_fallback(part), level=t.level, rate=rate)


def serving_point(gpu: str, *, engine: str | None, moe: bool) -> dict[str, Any]:
    return {"chip": gpu, "framework": engine or table().serving.default_stack or DEFAULT_ENGINE, "moe": moe}


def serving_interval(value: float, metric: Literal["throughput", "ttft", "tpot"], point: dict[str, Any],
                     rate: bool = False) -> Interval:
    """The interval of a serving figure: metric names whose residuals set it (a throughput's with
    rate=True; a cost per token scales as the time per token: metric throughput, rate=False)."""
    t = table()
    part = t.serving
    feats = serving_features(point, _validated(part))
    own = part.metrics[metric].bands if metric in part.metrics else []
    # A TPOT without measurements of its own takes the throughput's band: a static batch's
    # throughput is decode-bound (docs/validation.md).
    borrowed = not own and metric == "tpot"
    rows = part.metrics["throughput"].bands if borrowed else own
    iv = interval(value, _bands(rows), feats, SERVING_FEATURES, widen=t.widen, fallback=_fallback(part),
                  level=t.level, rate=rate)
    return replace(iv, basis="the throughput's band (no public TPOT measurement): " + iv.basis) if borrowed else iv


def _get(section: Any, name: str) -> Any:
    """A field of a case section that may be a dict or a model (stacks add fields over time)."""
    if section is None:
        return None
    return section.get(name) if isinstance(section, dict) else getattr(section, name, None)


def case_point(case: Any, defaults: dict[str, str | None] | None = None) -> dict[str, Any]:
    """The regime description of a validation case (training or inference), from its stated
    fields only (never its source or notes): chip, stack, attention kernel, scale, MoE. A stack
    the case does not state is `defaults` (framework, engine: the predictors' documented
    defaults, validate/runner.py stack_defaults), else regime.DEFAULT_FRAMEWORK / DEFAULT_ENGINE."""
    defaults = defaults or {}
    from gpucluster.catalog import catalog

    model, hw = getattr(case, "model", None) or {}, case.hardware or {}
    gpu = catalog.gpus.get(hw["gpu"]).name
    moe = (_get(model, "experts") or 1) > 1
    if case.kind == "training":
        tr = getattr(case, "training", None) or {}
        framework = _get(tr, "framework") or defaults.get("framework") or DEFAULT_FRAMEWORK
        return training_point(gpu, _get(tr, "precision") or "bf16", framework=framework,
                              attention=_get(tr, "attention"), fused=True, gpus=hw["gpus"],
                              seq_len=_get(model, "seq_len") or 0, moe=moe)
    engine = _get(getattr(case, "serving", None), "engine") or defaults.get("engine") or DEFAULT_ENGINE
    return serving_point(gpu, engine=engine, moe=moe)


# What each validated metric is, for its interval: (table part, metric group, a rate?)
CASE_METRICS: dict[str, tuple[str, str, bool]] = {
    "iteration_s": ("training", "step", False), "tflops_per_gpu": ("training", "step", True),
    "tokens_per_s_per_gpu": ("training", "step", True), "mfu": ("training", "step", True),
    "tokens_per_s": ("serving", "throughput", True), "latency_s": ("serving", "throughput", False),
    "ttft_s": ("serving", "ttft", False), "tpot_s": ("serving", "tpot", False)}


def case_interval(case: Any, metric: str, predicted: float,
                  defaults: dict[str, str | None] | None = None) -> Interval | None:
    """The interval of a validation case's predicted metric (None: a kind or metric without one)."""
    if case.kind not in ("training", "inference"):
        return None
    key = metric
    if case.kind == "inference" and metric == "tokens_per_s_per_gpu":
        key = "tokens_per_s"
    part, group, rate = CASE_METRICS.get(key, ("", "", False))
    if (part == "training") != (case.kind == "training") or not part:
        return None
    point = case_point(case, defaults)
    if part == "training":
        return training_interval(predicted, point, rate=rate)
    return serving_interval(predicted, group, point, rate=rate)  # type: ignore[arg-type]


