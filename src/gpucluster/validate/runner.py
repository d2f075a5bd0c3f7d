"""Predict every case of validation files and summarise the errors per kind."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from gpucluster.api_args import ONE_PATH, checked
from gpucluster.specs.loader import load_yaml, parse_data
from gpucluster.specs.validation_case import ValidationFile
from gpucluster.validate import training_predictor  # registers the `training` kind; its defaults_taken
from gpucluster.validate import inference_predictor  # registers the `inference` kind; its defaults_taken
from gpucluster.validate.conventions import compared_metric, speed_bias
from gpucluster.validate.in_sample import in_sample
from gpucluster.errors import UserError
from gpucluster.validate.predictors import Invalid, Unsupported, predictors


@dataclass
class CaseResult:
    id: str
    kind: str
    metric: str
    measured: float
    predicted: float | None
    error: float | None  # (predicted - measured) / measured
    source: str | None = None
    file: str | None = None
    reason: str | None = None
    in_sample: bool = False  # the GPU's efficiency was fitted on this file's runs (validate/in_sample.py)
    interval: tuple[float, float] | None = None   # the prediction's calibrated interval (catalog/intervals.py)
    covered: bool | None = None                   # the measured value lies inside it
    interval_in_sample: bool = False              # the interval table was calibrated on this file
    defaults: list[str] | None = None  # documented defaults the case took for settings it does not state

    def to_json(self) -> dict:
        d = asdict(self)
        for key in ("reason", "defaults"):
            if d[key] is None:
                del d[key]
        if d["interval"] is None:
            for k in ("interval", "covered", "interval_in_sample"):
                del d[k]
        else:
            d["interval"] = list(d["interval"])
        return d


def stack_defaults() -> dict[str, str | None]:
    """The framework and engine a case runs when it states none: the predictors' documented
    defaults (their `framework` / `engine` field defaults or STACK_DEFAULTS), None where the
    predictor has no such field (model/regime.py's defaults then apply)."""
    from gpucluster.validate.inference_predictor import Serving
    from gpucluster.validate.training_predictor import STACK_DEFAULTS, Training

    def default(model: type, name: str, table: dict | None = None) -> str | None:
        field = model.model_fields.get(name)  # type: ignore[attr-defined]
        value = field.default if field is not None else None
        if not isinstance(value, str) and table is not None:
            value = table.get(name)
        return value if isinstance(value, str) else None

    return {"framework": default(Training, "framework", STACK_DEFAULTS), "engine": default(Serving, "engine")}


def case_defaults(case) -> dict[str, str | None]:
    """`stack_defaults` for this case: a training case that names no framework runs the one its
    stated fields give (training_predictor.default_framework, docs/training.md)."""
    out = stack_defaults()
    if case.kind == "training":
        from gpucluster.validate.predictors import Unsupported, section
        from gpucluster.validate.training_predictor import Training, default_framework

        try:
            out["framework"] = default_framework(section(Training, getattr(case, "training", None), "training"))
        except Unsupported:
            pass
    return out


def _interval(case, metric: str, value: float | None, measured: float, path: str | Path) -> dict:
    """The calibrated interval of one prediction and whether the measurement lies in it."""
    if value is None or case.kind not in ("training", "inference"):
        return {}
    from gpucluster.catalog.intervals import calibrated_on
    from gpucluster.model.intervals import case_interval
    from gpucluster.errors import UserError

    try:
        iv = case_interval(case, metric, value, case_defaults(case))
    except (UserError, KeyError, TypeError):   # a case the regime cannot be read from: no interval
        return {}
    if iv is None:
        return {}
    return {"interval": (iv.lo, iv.hi), "covered": iv.contains(measured), "interval_in_sample": calibrated_on(path)}


def load_file(path: str | Path) -> ValidationFile:
    data, lines = load_yaml(path)
    return parse_data(ValidationFile, data, str(path), lines)


@checked(ONE_PATH)
def run_file(path: str | Path) -> list[CaseResult]:
    vf = load_file(path)
    results: list[CaseResult] = []
    for case in vf.cases:
        predicted: dict[str, float] = {}
        reason = None
        if case.kind not in predictors:
            reason = f"kind {case.kind!r} is not supported yet (supported: {', '.join(predictors.names())})"
        else:
            try:
                predicted = predictors.get(case.kind)(case)
            except Invalid as exc:   # bad input: exit 2 naming the case, never a row and exit 0
                raise UserError(str(exc), file=str(path)[:200], field=f"case {case.id[:60]!r}") from None
            except Unsupported as exc:
                reason = str(exc)
            except ValueError as exc:  # a combination the model cannot evaluate: a reason, never a crash
                reason = f"the model cannot evaluate this case: {exc}"
        fitted = in_sample(case, path)
        defaults = None
        if reason is None and case.kind == "training":
            defaults = training_predictor.defaults_taken(case)
        elif reason is None and case.kind == "inference":
            defaults = inference_predictor.defaults_taken(case, predicted)
        for metric, measured in case.measured.items():
            value = predicted.get(compared_metric(metric))
            why = reason
            if value is None and why is None:
                why = f"metric {metric!r} is not predicted for {case.kind} (predicted: {', '.join(predicted)})"
            error = (value - measured) / measured if value is not None else None
            results.append(CaseResult(case.id, case.kind, metric, measured, value, error, case.source,
                                      str(path), why, fitted and value is not None, defaults=defaults,
                                      **_interval(case, metric, value, measured, path)))
    return results


def summarize(results: list[CaseResult]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for kind in sorted({r.kind for r in results}):
        rows = [r for r in results if r.kind == kind]
        errs = [abs(r.error) for r in rows if r.error is not None]
        bias = [speed_bias(r.metric, r.error) for r in rows if r.error is not None]
        out[kind] = {
            "cases": len(rows),
            "predicted": len(errs),
            "in_sample": sum(r.in_sample for r in rows),
            "median_abs_error": statistics.median(errs) if errs else None,
            "mean_abs_error": statistics.fmean(errs) if errs else None,
            "max_abs_error": max(errs) if errs else None,
            # Signed: + the model predicts faster than measured (a time metric's error flipped).
            "mean_speed_bias": statistics.fmean(bias) if bias else None,
            **coverage_of(rows),
        }
    return out


def coverage_of(rows: list[CaseResult]) -> dict:
    """The share of predictions whose measured value lies inside their interval, and the
    median relative half-width (None where no prediction has an interval)."""
    with_iv = [r for r in rows if r.interval is not None and r.predicted]
    if not with_iv:
        return {"with_interval": 0, "covered": 0, "coverage": None, "median_half_width": None,
                "interval_in_sample": 0}
    covered = sum(bool(r.covered) for r in with_iv)
    half = statistics.median((r.interval[1] - r.interval[0]) / 2 / r.predicted for r in with_iv)  # type: ignore[index,operator]
    return {"with_interval": len(with_iv), "covered": covered, "coverage": covered / len(with_iv),
            "median_half_width": half, "interval_in_sample": sum(r.interval_in_sample for r in with_iv)}


def coverage_by_file(results: list[CaseResult]) -> dict[str, dict]:
    """coverage_of per file and kind (files named by their base name)."""
    out: dict[str, dict] = {}
    for key in sorted({(Path(r.file or "-").name, r.kind) for r in results}):
        rows = [r for r in results if (Path(r.file or "-").name, r.kind) == key]
        cov = coverage_of(rows)
        if cov["with_interval"]:
            out[f"{key[0]} {key[1]}"] = cov
    return out
