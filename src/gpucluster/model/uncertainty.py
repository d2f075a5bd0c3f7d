"""Calibrated intervals: how far a prediction can be trusted, from the model's own
cross-validated errors in the regime the prediction falls in (model/regime.py).

A *residual* is the ratio measured / predicted of a time (a training step, a TTFT, a TPOT;
for a throughput, predicted / measured, so that every ratio reads as "the real time is
this many times the predicted one"), each from a prediction whose fitted constants never
saw that case's source (leave-one-source-out, benchmarks/cross_validate.py).

A *band* is the central LEVEL (80%) interval of log(ratio) over the residuals of one regime,
every source weighing the same in all (a source with 400 runs of one stack must not decide
the interval of every other stack); each side is the wider of the symmetric |log| quantile
and its own percentile (band_of). An interval is the prediction times the band, widened to
hold the prediction itself.

Pooling hierarchy: the regime's features are dropped from the last to the first
(regime.TRAINING_FEATURES / SERVING_FEATURES) until the pooled regime holds at least
MIN_CASES residuals from at least MIN_SOURCES sources. Each feature dropped while the
prediction sits on its unvalidated side (chip not measured, framework not validated, ...)
widens the band by the table's `widen` factor in log space: the pooled residuals come
from better-checked runs than this one. With no residual at all, the table's `fallback`
band applies (documented in intervals.yaml).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster.model.regime import UNVALIDATED, describe

LEVEL = 0.8
# An 80% interval needs at least eight residuals (below that its 10th/90th percentiles are the extremes)
# from three sources (one or two sources share their setups: a band on them misses the next source).
MIN_CASES = 8
MIN_SOURCES = 3


@dataclass(frozen=True)
class Residual:
    id: str
    source: str
    features: Mapping[str, bool]
    ratio: float          # measured / predicted time (predicted / measured throughput)


@dataclass(frozen=True)
class Band:
    """The LEVEL interval of the ratio in one (possibly pooled) regime."""
    regime: Mapping[str, bool]     # the features this band is kept for (a prefix of the hierarchy)
    lo: float
    hi: float
    cases: int
    sources: int

    def to_json(self) -> dict[str, Any]:
        return {"regime": dict(self.regime), "lo": round(self.lo, 4), "hi": round(self.hi, 4),
                "cases": self.cases, "sources": self.sources}


@dataclass(frozen=True)
class Interval:
    """A prediction's LEVEL interval, and what it rests on."""
    point: float
    lo: float
    hi: float
    level: float
    regime: str                    # the prediction's regime, in words
    basis: str                     # where the band comes from (cases, sources, pooling, widening)
    pooled: bool = False           # the band is a coarser regime's
    widened: int = 0               # unvalidated features pooled over (each widens the band)
    fallback: bool = False         # no cross-validated residual at all: the documented fallback

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the point."""
        return (self.hi - self.lo) / 2 / self.point if self.point else math.inf

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def text(self, fmt: str = "{:.3g}") -> str:
        return f"{fmt.format(self.lo)}-{fmt.format(self.hi)}"

    def to_json(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "level": self.level, "regime": self.regime, "basis": self.basis,
                "pooled": self.pooled, "widened": self.widened, "fallback": self.fallback}


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The q-quantile of values under weights, interpolated between the weighted mid-points
    of the sorted values (the Hazen rule, which weights of 1 reduce to)."""
    if not values:
        raise ValueError("no values")
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    cum, mids = 0.0, []
    for _, w in pairs:
        mids.append((cum + w / 2) / total)
        cum += w
    if q <= mids[0]:
        return pairs[0][0]
    if q >= mids[-1]:
        return pairs[-1][0]
    for i in range(1, len(mids)):
        if q <= mids[i]:
            f = (q - mids[i - 1]) / (mids[i] - mids[i - 1])
            return pairs[i - 1][0] + f * (pairs[i][0] - pairs[i - 1][0])
    return pairs[-1][0]


def band_of(residuals: Sequence[Residual], regime: Mapping[str, bool], level: float = LEVEL) -> Band:
    """The band of these residuals, every source weighing the same. Each side is the wider of two
    estimates in log space: the `level` quantile of |log(measured / predicted)| (symmetric: a source
    left out differs from the others mostly by a bias of either sign, which a few sources' one-sided
    tails under-state; vTrain's bias fell outside a 10-90% band of the others), and that side's own
    percentile (10th or 90th). The errors lean one way (stacks the model was not fitted on ran
    slower than predicted more often than faster), and a symmetric band alone hides the lean."""
    per_source: dict[str, int] = defaultdict(int)
    for r in residuals:
        per_source[r.source] += 1
    w = [1 / per_source[r.source] for r in residuals]
    logs = [math.log(r.ratio) for r in residuals]
    q = weighted_quantile([abs(x) for x in logs], w, level)
    low, high = weighted_quantile(logs, w, (1 - level) / 2), weighted_quantile(logs, w, (1 + level) / 2)
    return Band(dict(regime), math.exp(min(-q, low)), math.exp(max(q, high)), len(residuals), len(per_source))


def prefixes(features: Mapping[str, bool], order: Sequence[str]) -> list[dict[str, bool]]:
    """The regime and its pooled parents, most specific first (down to the empty regime: all)."""
    return [{k: features[k] for k in order[:n]} for n in range(len(order), -1, -1)]


def build_bands(residuals: Sequence[Residual], order: Sequence[str], level: float = LEVEL) -> list[Band]:
    """Every regime of the hierarchy that holds enough residuals, with its band."""
    groups: dict[tuple, list[Residual]] = defaultdict(list)
    for r in residuals:
        for n in range(len(order) + 1):
            groups[tuple((k, r.features[k]) for k in order[:n])].append(r)
    out = []
    for key, rs in groups.items():
        if len(rs) >= MIN_CASES and len({r.source for r in rs}) >= MIN_SOURCES:
            out.append(band_of(rs, dict(key), level))
    out.sort(key=lambda b: (-len(b.regime), tuple(b.regime.items())))
    return out


@dataclass(frozen=True)
class Lookup:
    band: Band | None
    dropped_unvalidated: tuple[str, ...] = field(default_factory=tuple)


def find_band(bands: Sequence[Band], features: Mapping[str, bool], order: Sequence[str]) -> Lookup:
    """The most specific band for these features, and the unvalidated features pooled over."""
    index = {tuple(b.regime.items()): b for b in bands}
    for n in range(len(order), -1, -1):
        key = tuple((k, features[k]) for k in order[:n])
        if key in index:
            dropped = tuple(k for k in order[n:] if features[k] == UNVALIDATED[k])
            return Lookup(index[key], dropped)
    return Lookup(None, tuple(k for k in order if features[k] == UNVALIDATED[k]))


def factors(bands: Sequence[Band], features: Mapping[str, bool], order: Sequence[str], widen: float,
            fallback: tuple[float, float]) -> tuple[float, float, str, Lookup]:
    """(lo, hi) factors on a predicted time, always holding 1 (the prediction), and the basis in words."""
    found = find_band(bands, features, order)
    if found.band is None:
        lo, hi = fallback
        basis = "no cross-validated case in this regime or any coarser one: the documented fallback band"
    else:
        b = found.band
        k = widen ** len(found.dropped_unvalidated)
        lo, hi = math.exp(min(0.0, math.log(b.lo)) * k), math.exp(max(0.0, math.log(b.hi)) * k)
        pooled = "" if len(b.regime) == len(order) else (
            f"; pooled with {describe(b.regime) or 'all regimes'}" if b.regime else "; pooled over all regimes")
        wid = (f"; widened x{k:.2g} in log space for {describe({d: features[d] for d in found.dropped_unvalidated})}"
               ) if found.dropped_unvalidated else ""
        basis = (f"leave-one-source-out errors of {b.cases} public cases from {b.sources} sources{pooled}{wid}")
    return min(lo, 1.0), max(hi, 1.0), basis, found


def interval(point: float, bands: Sequence[Band], features: Mapping[str, bool], order: Sequence[str], *,
             widen: float, fallback: tuple[float, float], level: float = LEVEL, rate: bool = False) -> Interval:
    """The interval of a predicted time (rate=False) or throughput / cost driver (rate=True:
    the interval is point / the time factors)."""
    lo, hi, basis, found = factors(bands, features, order, widen, fallback)
    a, b = (point / hi, point / lo) if rate else (point * lo, point * hi)
    pooled = found.band is not None and len(found.band.regime) < len(order)
    return Interval(point, a, b, level, describe(features), basis, pooled, len(found.dropped_unvalidated),
                    found.band is None)


def coverage(rows: Sequence[tuple[str, float, float, float]]) -> dict[str, Any]:
    """rows: (group, ratio, lo, hi). Share of ratios inside [lo, hi] per group and overall, the
    median over groups, and the median relative half-width."""
    groups: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for g, r, lo, hi in rows:
        groups[g].append((r, lo, hi))

    def stats(items: list[tuple[float, float, float]]) -> dict[str, Any]:
        inside = sum(lo <= r <= hi for r, lo, hi in items)
        return {"cases": len(items), "covered": inside, "coverage": inside / len(items),
                "median_half_width": statistics.median((hi - lo) / 2 for _, lo, hi in items)}

    per = {g: stats(v) for g, v in groups.items()}
    everything = [x for v in groups.values() for x in v]
    return {"all": stats(everything) if everything else None, "by_group": per,
            "median_of_groups": statistics.median(p["coverage"] for p in per.values()) if per else None}
