"""Predictions of runs the catalog was fitted on are labelled in-sample; the same runs in a file the
fit never saw are not."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpucluster.validate.runner import run_file, summarize

LLAMA3 = Path(__file__).resolve().parents[2] / "validation" / "training-llama3-meta.yaml"


def test_the_file_the_h100_bf16_fraction_was_fitted_on_is_in_sample():
    rows = run_file(LLAMA3)
    assert rows and all(r.in_sample for r in rows if r.predicted is not None)
    summary = summarize(rows)["training"]
    assert summary["in_sample"] == summary["predicted"] > 0


def test_the_same_runs_under_another_name_are_out_of_sample(tmp_path):
    other = tmp_path / "my-cluster-runs.yaml"
    shutil.copy(LLAMA3, other)
    rows = run_file(other)
    assert rows and not any(r.in_sample for r in rows)
    assert [r.predicted for r in rows] == [r.predicted for r in run_file(LLAMA3)]
    assert summarize(rows)["training"]["in_sample"] == 0
