"""Sampling the scenario's distributions (numpy, vectorised, one seeded stream each)."""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from gpucluster.files import is_file
from gpucluster.errors import UserError
from gpucluster.specs.scenario import Dist
from gpucluster.specs.workload import filled


def sample(d: Dist, n: int, rng: np.random.Generator, base: Path | None = None, where: dict | None = None) -> np.ndarray:
    if n <= 0:
        return np.zeros(0)
    # Each kind's parameters are set: the Dist validator refuses a spec without them.
    if d.dist == "fixed":
        x = np.full(n, float(filled(d.value)))
    elif d.dist == "uniform":
        x = rng.uniform(filled(d.low), filled(d.high), n)
    elif d.dist == "exponential":
        x = rng.exponential(filled(d.mean), n)
    elif d.dist == "lognormal":
        x = filled(d.median) * np.exp(filled(d.sigma) * rng.standard_normal(n))
    elif d.dist == "weibull":
        x = filled(d.scale) * rng.weibull(filled(d.shape), n)
    elif d.dist == "choice":
        p = None
        if d.weights is not None:
            w = np.asarray(d.weights, dtype=float)
            p = w / w.sum()
        x = rng.choice(np.asarray(d.values, dtype=float), size=n, p=p)
    else:  # empirical
        path = Path(filled(d.file)).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        values = empirical(str(path), d.column, where or {})
        x = rng.choice(values, size=n) * d.multiply
    if d.min is not None or d.max is not None:
        x = np.clip(x, d.min if d.min is not None else -np.inf, d.max if d.max is not None else np.inf)
    return x


@lru_cache(maxsize=16)
def _read_column(path: str, column: str | None) -> tuple[np.ndarray, int, str]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return np.zeros(0), 0, ""
        col = 0 if column is None else (header.index(column) if column in header else -1)
        if col < 0:
            return np.zeros(0), -1, ", ".join(header)
        out, bad = [], 0
        for row in reader:
            try:
                v = float(row[col])
                if not math.isfinite(v) or v < 0:
                    raise ValueError
                out.append(v)
            except (ValueError, IndexError):
                bad += 1
        return np.asarray(out), bad, ""


def empirical(path: str, column: str | None, where: dict) -> np.ndarray:
    if not is_file(path):
        raise UserError(f"empirical distribution file not found: {path}", **where)
    values, bad, header = _read_column(path, column)
    if bad < 0:
        raise UserError(f"column {column!r} not in {path} (columns: {header})", **where)
    if values.size == 0:
        raise UserError(f"no usable values in {path}", **where)
    return values
