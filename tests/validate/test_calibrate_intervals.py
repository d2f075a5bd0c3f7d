"""benchmarks/calibrate_intervals.py: coverage is cross-validated (a case's interval never uses
its own source's residuals), and a case's regime comes from its stated fields only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpucluster.model.regime import TRAINING_FEATURES  # noqa: E402
from gpucluster.model.uncertainty import Residual  # noqa: E402
from gpucluster.specs.validation_case import Case  # noqa: E402

calibrate = pytest.importorskip("calibrate_intervals")

VALID = dict.fromkeys(TRAINING_FEATURES, True) | {"moe": False}


def test_a_sources_interval_never_uses_its_own_residuals():
    # Three sources centred on 1.0, one source whose runs all took twice the predicted time: were
    # its own residuals in its band, some of them would be covered.
    rs = [Residual(f"{s}{i}", s, VALID, 1.0 + 0.01 * (i - 5)) for s in ("a", "b", "c") for i in range(11)]
    rs += [Residual(f"odd{i}", "odd", VALID, 2.0) for i in range(30)]
    cov = calibrate.cross_validated_coverage(rs, TRAINING_FEATURES)
    assert cov["by_group"]["odd"]["coverage"] == 0.0
    assert cov["all"]["cases"] == len(rs)


def _case(**training) -> Case:
    return Case.model_validate({
        "id": "x", "kind": "training", "source": "Somebody 2024, FSDP run", "notes": "framework: megatron",
        "hardware": {"gpu": "H100", "gpus": 64, "gpus_per_node": 8},
        "model": {"layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096},
        "training": {"global_batch": 64, **training}, "measured": {"iteration_s": 1.0}})


def test_a_cases_regime_comes_from_its_fields_never_its_text():
    from gpucluster.model.intervals import case_point

    plain = case_point(_case())
    assert plain["framework"] == "megatron" and plain["attention"] == "flash"   # the documented defaults
    assert plain["chip"] == "H100-SXM5-80GB bf16" and plain["gpus"] == 64 and not plain["moe"]
    stated = case_point(_case(framework="fsdp", attention="unfused", precision="fp8"))
    assert stated["framework"] == "fsdp" and stated["attention"] == "unfused" and stated["chip"].endswith("fp8")
    other_text = _case()
    other_text.source, other_text.notes = "NVIDIA NeMo", "torchtitan"
    assert case_point(other_text) == plain
