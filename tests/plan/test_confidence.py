"""A plan says what it assumes, and when it promises more than anyone has published."""

from __future__ import annotations

import json

from gpucluster.model.training.layout import Layout
from gpucluster.plan.confidence import confidence

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from tests_cli_helpers import assert_one_line_error, run


def test_a_chip_with_no_published_run_is_assumed_and_says_why():
    c = confidence("B200", Layout(precision="bf16"), 0.40)
    assert c.level == "assumed"
    assert any("sustained" in a for a in c.assumptions)
    assert any("no published bf16 training run" in a for a in c.assumptions)


def test_mfu_above_the_best_published_run_is_flagged_with_its_source():
    c = confidence("A100-SXM4-80GB", Layout(precision="bf16"), 0.72)
    assert c.above_best_published and "Korthikanti" in c.above_best_published
    assert confidence("A100-SXM4-80GB", Layout(precision="bf16"), 0.50).above_best_published is None


def test_plan_json_carries_confidence_and_assumptions():
    out = run("plan", "train", "--gpu", "B200:8", "--nodes", "2", "--model", "llama3-8b", "--tokens", "1T",
              "--json", check_rc=0)
    doc = json.loads(out.stdout)
    assert doc["confidence"] == "assumed" and doc["assumptions"]
    assert doc["best"]["layout"]["overlap_dp_comm"] is True


def test_terminal_names_each_assumption():
    out = run("plan", "train", "--gpu", "B200:8", "--nodes", "2", "--model", "llama3-8b", "--tokens", "1T",
              check_rc=0)
    assert "assumption" in out.stdout and "B200" in out.stdout


def test_stack_options_are_inputs_and_bad_values_are_one_line():
    unfused = json.loads(run("plan", "train", "--gpu", "A100:8", "--model", "llama2-7b", "--tokens", "1B",
                             "--attention", "unfused", "--json", check_rc=0).stdout)
    assert unfused["best"]["layout"]["flash_attention"] is False
    assert_one_line_error(run("plan", "train", "--gpu", "A100:8", "--model", "llama2-7b", "--attention", "fast"),
                          "--attention")
    assert_one_line_error(run("plan", "train", "--gpu", "A100:8", "--model", "llama2-7b",
                              "--layout", "moe_overlap=magic"), "moe_overlap")


def test_plan_train_prices_gpu_hours_as_the_cluster_file_says():
    out = json.loads(run("plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-8b",
                         "--tokens", "100B", "--json", check_rc=0).stdout)
    assert out["price"]["usd_per_gpu_hour"] == 2.01 and "h200-256-ndr400.yaml" in out["price"]["source"]
    assert out["cost_usd"] == 2.01 * out["gpu_hours"]
