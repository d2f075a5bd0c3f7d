"""Calibrated intervals: the band arithmetic, pooling, fallback and coverage (model/uncertainty.py),
the regime classifier (model/regime.py) and the shipped table (catalog/intervals.py)."""

from __future__ import annotations

import math
import random

import pytest

from gpucluster.model.regime import (SERVING_FEATURES, TRAINING_FEATURES, Validated, attention_name, chip_key,
                                     training_features)
from gpucluster.model.uncertainty import (MIN_SOURCES, Residual, band_of, build_bands, coverage, factors,
                                          find_band, interval, weighted_quantile)

ALL_VALID = {"moe": False, "chip_measured": True, "framework_validated": True, "attention_validated": True,
             "scale_validated": True}


def _residuals(n_sources: int, per_source: int, sigma: float, features=ALL_VALID, seed: int = 1,
               shift: float = 0.0) -> list[Residual]:
    rng = random.Random(seed)
    return [Residual(f"s{s}-{i}", f"s{s}", features, math.exp(rng.gauss(shift, sigma)))
            for s in range(n_sources) for i in range(per_source)]


def test_weighted_quantile_equal_weights_is_the_hazen_quantile():
    vals = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert weighted_quantile(vals, [1] * 5, 0.5) == 3.0
    assert weighted_quantile(vals, [1] * 5, 0.1) == 1.0          # below the first mid-point: the minimum
    assert weighted_quantile(vals, [1] * 5, 0.3) == pytest.approx(2.0)
    assert weighted_quantile(vals, [1] * 5, 0.4) == pytest.approx(2.5)


def test_every_source_weighs_the_same():
    # 100 residuals of one source at 1.0 and one residual each of two sources at 2.0: the
    # median source-weighted is 2.0's side, not the big source's.
    rs = [Residual(f"a{i}", "a", ALL_VALID, 1.0) for i in range(100)]
    rs += [Residual("b", "b", ALL_VALID, 2.0), Residual("c", "c", ALL_VALID, 2.0)]
    band = band_of(rs, {})
    assert band.hi == pytest.approx(2.0) and band.cases == 102 and band.sources == 3


def test_a_leaning_band_keeps_the_wider_side():
    # Half the sources right, 40% 22% too slow, 10% 65% too slow: |log| puts 80% within 0.2, but
    # the slow side's own 90th percentile is further out, and the band keeps it; the fast side
    # stays the symmetric one (no residual is below 1 at all).
    rs = [Residual(f"{s}", f"s{s}", ALL_VALID, math.exp(x))
          for s, x in enumerate([0.0] * 5 + [0.2] * 4 + [0.5])]
    band = band_of(rs, {})
    assert band.lo == pytest.approx(math.exp(-0.2))
    assert band.hi > math.exp(0.2) * 1.05
    assert band.hi == pytest.approx(math.exp(weighted_quantile([0.0] * 5 + [0.2] * 4 + [0.5], [1] * 10, 0.9)))
    # A mirror image leans the other way.
    mirrored = band_of([Residual(r.id, r.source, r.features, 1 / r.ratio) for r in rs], {})
    assert mirrored.lo == pytest.approx(1 / band.hi) and mirrored.hi == pytest.approx(1 / band.lo)


@pytest.mark.parametrize("seed", range(5))
def test_interval_holds_the_point_prediction(seed):
    rng = random.Random(seed)
    # Residuals all above 1 (the model always too fast): the band still reaches down to the prediction.
    rs = [Residual(f"{s}{i}", f"s{s}", ALL_VALID, 1.2 + rng.random()) for s in range(4) for i in range(5)]
    bands = build_bands(rs, TRAINING_FEATURES)
    point = rng.uniform(0.1, 100)
    for rate in (False, True):
        iv = interval(point, bands, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6), rate=rate)
        assert iv.lo <= point <= iv.hi and iv.contains(point)
        assert not iv.fallback and iv.half_width > 0


def test_a_rate_interval_is_the_time_interval_inverted():
    bands = build_bands(_residuals(4, 10, 0.1), TRAINING_FEATURES)
    t = interval(2.0, bands, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    r = interval(0.5, bands, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6), rate=True)
    assert r.lo == pytest.approx(1 / t.hi) and r.hi == pytest.approx(1 / t.lo)


def test_coverage_counts_inside_per_group_and_overall():
    rows = [("a", 1.0, 0.9, 1.1), ("a", 1.2, 0.9, 1.1), ("b", 0.95, 0.9, 1.1), ("b", 1.1, 0.9, 1.1)]
    cov = coverage(rows)
    assert cov["by_group"]["a"]["coverage"] == 0.5 and cov["by_group"]["b"]["coverage"] == 1.0
    assert cov["all"]["covered"] == 3 and cov["all"]["coverage"] == 0.75
    assert cov["all"]["median_half_width"] == pytest.approx(0.1)


def test_cross_validated_coverage_of_synthetic_residuals_is_near_the_level():
    """Residuals drawn from one lognormal law: each source's interval, built from the other
    sources only, holds about 80% of its residuals."""
    rs = _residuals(10, 60, 0.15, seed=7)
    rows = []
    for src in {r.source for r in rs}:
        bands = build_bands([r for r in rs if r.source != src], TRAINING_FEATURES)
        for r in rs:
            if r.source == src:
                lo, hi, _, _ = factors(bands, r.features, TRAINING_FEATURES, 1.5, (0.6, 1.6))
                rows.append((src, r.ratio, lo, hi))
    cov = coverage(rows)["all"]
    assert 0.74 <= cov["coverage"] <= 0.86
    # 80% of a lognormal with sigma 0.15: +-1.28 sigma, about 19% half-width
    assert 0.15 <= cov["median_half_width"] <= 0.24


def test_a_regime_without_its_own_cases_pools_up_and_widens():
    bands = build_bands(_residuals(4, 10, 0.1), TRAINING_FEATURES)
    unmeasured = dict(ALL_VALID, chip_measured=False)
    found = find_band(bands, unmeasured, TRAINING_FEATURES)
    assert found.band is not None and found.band.regime == {"moe": False}
    assert found.dropped_unvalidated == ("chip_measured",)
    base = interval(1.0, bands, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    wide = interval(1.0, bands, unmeasured, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    assert wide.pooled and wide.widened == 1 and "widened" in wide.basis
    assert math.log(wide.hi) == pytest.approx(1.5 * math.log(base.hi))
    assert math.log(wide.lo) == pytest.approx(1.5 * math.log(base.lo))


def test_a_regime_with_no_data_gets_the_documented_fallback():
    # No band anywhere (no public case, or none with enough sources): the fallback, as documented.
    few = build_bands(_residuals(MIN_SOURCES - 1, 50, 0.1), TRAINING_FEATURES)
    iv = interval(10.0, few, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    assert iv.fallback and (iv.lo, iv.hi) == (pytest.approx(6.0), pytest.approx(16.0))
    assert "fallback" in iv.basis


def test_moe_without_moe_cases_rests_on_all_regimes_widened():
    moe = dict(ALL_VALID, moe=True)
    bands = build_bands(_residuals(4, 10, 0.1), TRAINING_FEATURES)   # dense only
    dense = interval(10.0, bands, ALL_VALID, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    iv = interval(10.0, bands, moe, TRAINING_FEATURES, widen=1.5, fallback=(0.6, 1.6))
    assert iv.pooled and iv.widened == 1 and "pooled over all regimes" in iv.basis
    assert iv.lo < dense.lo and iv.hi > dense.hi


def test_a_band_needs_enough_sources():
    few = _residuals(MIN_SOURCES - 1, 50, 0.1)
    assert build_bands(few, TRAINING_FEATURES) == []


def test_regime_classifier():
    v = Validated.of([{"chip": chip_key("A100", "bf16"), "framework": "megatron", "attention": "flash", "gpus": 8,
                       "seq_len": 2048},
                      {"chip": chip_key("H100", "fp8"), "framework": "megatron", "attention": "unfused", "gpus": 1024,
                       "seq_len": 4096}])
    base = {"chip": chip_key("A100", "fp16"), "framework": "megatron", "attention": attention_name("default"),
            "gpus": 64, "seq_len": 4096, "moe": False}
    assert training_features(base, v) == ALL_VALID                    # fp16 runs at the bf16 rate
    assert not training_features(dict(base, chip="MI300X bf16"), v)["chip_measured"]
    assert not training_features(dict(base, framework="fsdp"), v)["framework_validated"]
    assert not training_features(dict(base, attention="flash3"), v)["attention_validated"]
    assert not training_features(dict(base, gpus=16384), v)["scale_validated"]
    assert not training_features(dict(base, seq_len=131072), v)["scale_validated"]
    assert training_features(dict(base, gpus=1, seq_len=512), v)["scale_validated"]   # smaller: not an extrapolation
    assert training_features(dict(base, moe=True), v)["moe"]
    assert attention_name("flash", fused=False) == "unfused"


def test_the_shipped_table_loads_and_gives_intervals():
    from gpucluster.catalog.intervals import table
    from gpucluster.model.intervals import serving_interval, serving_point, training_interval, training_point

    t = table()
    assert t.level == 0.8 and t.training.features == list(TRAINING_FEATURES)
    assert t.serving.features == list(SERVING_FEATURES)
    assert t.source.script == "benchmarks/calibrate_intervals.py" and t.source.files
    p = training_point("A100-SXM4-80GB", "bf16", framework=None, attention=None, fused=True, gpus=64, seq_len=2048,
                       moe=False)
    iv = training_interval(3.0, p)
    assert iv.lo <= 3.0 <= iv.hi and iv.level == 0.8
    # A chip with no public training run in a regime never rests on a narrower band than a measured one.
    far = training_interval(3.0, dict(p, chip="MI300X bf16"))
    assert math.log(far.hi / far.lo) >= math.log(iv.hi / iv.lo) - 1e-9
    s = serving_interval(100.0, "throughput", serving_point("H100-SXM5-80GB", engine=None, moe=False), rate=True)
    assert s.lo <= 100.0 <= s.hi
