"""Predict every case of validation files and summarise the errors per kind."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from gpucluster.api_args import ONE_PATH, checked
from gpucluster.specs.loader import load_yaml, parse_data
from gpucluster.specs.validation_case import ValidationFile
from gpucluster.validate import training_predictor  # noqa: F401  (registers the `training` kind)
from gpucluster.validate import inference_predictor  # noqa: F401  (registers the `inference` kind)
from gpucluster.validate.conventions import compared_metric
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

    def to_json(self) -> dict:
        d = asdict(self)
        if d["reason"] is None:
            del d["reason"]
        return d


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
        for metric, measured in case.measured.items():
            value = predicted.get(compared_metric(case.source, metric))
            why = reason
            if value is None and why is None:
                why = f"metric {metric!r} is not predicted for {case.kind} (predicted: {', '.join(predicted)})"
            error = (value - measured) / measured if value is not None else None
            results.append(CaseResult(case.id, case.kind, metric, measured, value, error, case.source,
                                      str(path), why, fitted and value is not None))
    return results


def summarize(results: list[CaseResult]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for kind in sorted({r.kind for r in results}):
        rows = [r for r in results if r.kind == kind]
        errs = [abs(r.error) for r in rows if r.error is not None]
        out[kind] = {
            "cases": len(rows),
            "predicted": len(errs),
            "in_sample": sum(r.in_sample for r in rows),
            "median_abs_error": statistics.median(errs) if errs else None,
            "mean_abs_error": statistics.fmean(errs) if errs else None,
            "max_abs_error": max(errs) if errs else None,
        }
    return out
