"""Every plan figure carries its calibrated interval (terminal, JSON, HTML), the ranking says
which layouts the model cannot tell apart, and `validate` prints coverage. In-process runs."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "documents"))
from doc_helpers import invoke

TRAIN = ["plan", "train", "--gpu", "H100:8", "--nodes", "2", "--model", "llama2-7b", "--tokens", "100B"]
SERVE = ["plan", "serve", "--model", "llama3-8b", "--rate", "10", "--gpu", "H100:8", "--compare", "A100-SXM4-80GB"]


@pytest.fixture(scope="module")
def train_json() -> dict:
    res = invoke(*TRAIN, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_plan_train_json_interval_holds_every_figure(train_json):
    iv, best = train_json["interval"], train_json["best"]
    assert iv["level"] == 0.8 and "chip measured" in iv["regime"] and "public cases" in iv["basis"]
    assert iv["step_s"]["lo"] <= best["step_s"] <= iv["step_s"]["hi"]
    assert best["step_s_interval"] == iv["step_s"]
    assert iv["tokens_per_s"]["lo"] <= best["tokens_per_s"] <= iv["tokens_per_s"]["hi"]
    assert iv["time_to_train_s"]["lo"] <= train_json["time_to_train_s"] <= iv["time_to_train_s"]["hi"]
    assert iv["gpu_hours"]["lo"] <= train_json["gpu_hours"] <= iv["gpu_hours"]["hi"]
    assert iv["mfu"]["hi"] <= 1.0            # no step is faster than the chip's peak
    if train_json["cost_usd"] is not None:
        assert iv["cost_usd"]["lo"] <= train_json["cost_usd"] <= iv["cost_usd"]["hi"]


def test_plan_train_ranking_marks_layouts_inside_the_best_interval(train_json):
    ranked = train_json["ranked"]
    assert ranked[0].get("distinguishable_from_best") is None
    lo, hi = train_json["interval"]["step_s"]["lo"], train_json["interval"]["step_s"]["hi"]
    for e in ranked[1:]:
        inside = lo <= e["step_s"] <= hi or e["step_s_interval"]["lo"] <= ranked[0]["step_s"] <= e["step_s_interval"]["hi"]
        assert e["distinguishable_from_best"] is (not inside)


def test_plan_train_terminal_and_html_show_the_interval(tmp_path):
    out = invoke(*TRAIN).stdout
    assert "80% interval" in out and "regime:" in out and "80% step s" in out and "vs #1" in out
    page = tmp_path / "plan.html"
    res = invoke(*TRAIN, "--html", str(page))
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert "80% interval" in html and "80% step (s)" in html and "leave-one-source-out" in html


def test_plan_serve_json_terminal_and_html_intervals(tmp_path):
    res = invoke(*SERVE, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    best = doc["best"]
    iv = best["intervals"]
    assert iv["level"] == 0.8 and "engine" in iv["regime"]
    assert iv["per_replica_max_rate"]["lo"] <= best["per_replica_max_rate"] <= iv["per_replica_max_rate"]["hi"]
    assert iv["replicas"]["lo"] <= best["replicas"] <= iv["replicas"]["hi"] + 1   # ceil of the rate over capacity
    op = best["operating_point"]
    assert iv["ttft_p99_s"]["lo"] <= op["ttft_p99_s"] <= iv["ttft_p99_s"]["hi"]
    assert iv["tpot_p50_s"]["lo"] <= op["tpot_p50_s"] <= iv["tpot_p50_s"]["hi"]
    assert iv["usd_per_mtok"]["lo"] <= best["usd_per_mtok"] <= iv["usd_per_mtok"]["hi"]
    assert all("intervals" in a for a in doc["alternatives"])
    out = invoke(*SERVE).stdout
    assert "80% intervals" in out and "regime:" in out and "80% $/Mtok" in out
    page = tmp_path / "serve.html"
    assert invoke(*SERVE, "--html", str(page)).exit_code == 0
    html = page.read_text()
    assert "80% interval" in html and "80% $ per M tokens" in html


def test_validate_prints_and_reports_coverage(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(textwrap.dedent("""
        schema: gpucluster-validation/v1
        cases:
          - id: mine-a100
            kind: training
            hardware: {gpu: A100-SXM4-80GB, gpus: 8, gpus_per_node: 8}
            model: {layers: 24, hidden: 2048, heads: 16, seq_len: 2048, vocab: 50257}
            training: {global_batch: 64, micro_batch: 8, tp: 1, pp: 1, dp: 8, cp: 1, ep: 1, interleave: 1,
                       sequence_parallel: false, recompute: none, zero: 1}
            measured: {iteration_s: 1000.0}
    """))
    res = invoke("validate", str(p), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    case = doc["cases"][0]
    lo, hi = case["interval"]
    assert lo <= case["predicted"] <= hi
    assert case["covered"] is False and case["interval_in_sample"] is False   # 1000 s is far outside
    s = doc["summary"]["training"]
    assert s["with_interval"] == 1 and s["covered"] == 0 and s["coverage"] == 0
    assert doc["coverage"]["mine.yaml training"]["coverage"] == 0
    out = invoke("validate", str(p)).stdout
    assert "coverage" in out and "Interval coverage per file" in out and "outside" in out
