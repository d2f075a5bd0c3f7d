"""Which predictions are in-sample: the catalog fitted the case's GPU efficiency on that very file.

A `fitted` catalog source names the validation files it was fitted on (`fitted_on`); a case from
one of those files, on that GPU and precision, is predicted with a figure tuned on it, so its error
is in-sample. The out-of-sample figure is the leave-one-source-out error of
benchmarks/cross_validate.py (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.specs.validation_case import Case

_SAME_RATE = {"fp16": "bf16", "bf16": "fp16"}   # one rate, one fitted fraction (model.training.compute)


def _precision(case: Case, section: str) -> str:
    body: Any = getattr(case, section, None)
    value = body.get("precision", "bf16") if isinstance(body, dict) else "bf16"
    return str(value)


def in_sample(case: Case, path: str | Path) -> bool:
    hw = case.hardware or {}
    try:
        gpu = catalog.gpus.get(str(hw.get("gpu")))
    except UserError:
        return False
    if case.kind == "training":
        table, precision = gpu.efficiency.sustained_fraction, _precision(case, "training")
        key = precision if precision in table else _SAME_RATE.get(precision)
    elif case.kind == "inference":
        # no per-chip serving factor any more: the serving model's two per-phase constants were
        # fitted on these files, whatever the chip (model/serving/fitted.py)
        from gpucluster.model.serving.fitted import FITTED_ON
        return Path(path).name in FITTED_ON
    elif case.kind == "collective":
        # The scale-up link's latencies and ramp (benchmarks/collective_fit.py) were fitted on the file.
        link = catalog.links.get(gpu.scale_up.link)
        return Path(path).name in link.sources[link.base_latency_us.source].fitted_on
    else:
        return False
    entry = table.get(key) if key else None  # type: ignore[call-overload]  # key is a Precision by construction
    return entry is not None and Path(path).name in gpu.sources[entry.source].fitted_on
