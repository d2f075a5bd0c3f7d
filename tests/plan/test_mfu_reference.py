"""MFU plausibility, the same for every chip (issue 22): every plan is checked against the best
published run on its chip, or on its nearest validated sibling, and a plan above it is flagged in
the terminal, the JSON (as an assumption too), the HTML report and every sweep row."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.training.layout import Layout
from gpucluster.plan.confidence import confidence
from gpucluster.catalog.siblings import siblings
from gpucluster.plan.mfu_reference import MARGIN, mfu_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from tests_cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
H100_BF16 = catalog.gpus.get("H100-SXM5-80GB").efficiency.best_published_mfu["bf16"].value
A100_BF16 = catalog.gpus.get("A100-SXM4-80GB").efficiency.best_published_mfu["bf16"].value


def test_a_chip_with_its_own_figure_uses_its_own():
    for gpu, precision in (("H100", "bf16"), ("H100", "fp8"), ("A100-SXM4-80GB", "bf16")):
        entry = catalog.gpus.get(gpu)
        ref = mfu_reference(gpu, precision)
        assert ref is not None and not ref.borrowed and ref.from_gpu == entry.name
        own = entry.efficiency.best_published_mfu[precision]   # type: ignore[index]
        assert ref.value == own.value and ref.source == entry.sources[own.source].title
    # fp16 and bf16 run at the same tensor-core rate: H100's fp16 plans use its bf16 run
    fp16 = mfu_reference("H100", "fp16")
    assert fp16 is not None and fp16.from_precision == "bf16" and not fp16.borrowed


@pytest.mark.parametrize("gpu,sibling", [("H200-SXM-141GB", "H100-SXM5-80GB"), ("H100-PCIe", "H100-SXM5-80GB"),
                                         ("H100-NVL", "H100-SXM5-80GB"), ("H800", "H100-SXM5-80GB"),
                                         ("A100-SXM4-40GB", "A100-SXM4-80GB")])
def test_a_chip_with_no_published_run_borrows_its_nearest_validated_sibling(gpu, sibling):
    ref = mfu_reference(gpu, "bf16")
    assert ref is not None and ref.borrowed and ref.from_gpu == sibling
    mine, theirs = catalog.gpus.get(gpu), catalog.gpus.get(sibling)
    assert (mine.vendor, mine.architecture) == (theirs.vendor, theirs.architecture)
    assert not mine.efficiency.best_published_mfu
    assert sibling in ref.describe() and gpu in ref.describe()


def test_siblings_come_from_catalog_fields_and_nothing_crosses_an_architecture():
    # No Blackwell, CDNA3, Volta... chip has a published run: none borrows from another generation.
    for gpu in ("B200", "GB200", "B300", "GB300", "MI300X", "MI325X", "V100-SXM2-32GB", "L40S"):
        assert mfu_reference(gpu, "fp16") is None   # (Volta has no bf16)
        c = confidence(gpu, Layout(precision="fp16"), 0.99)
        assert c.above_best_published is None and any("to compare the MFU with" in a for a in c.assumptions)
    b200 = catalog.gpus.get("B200")
    assert {g.name for g in siblings(b200)} == {"GB200", "B300", "GB300"}   # Blackwell and Blackwell Ultra


def test_the_nearest_sibling_is_picked_by_peak_then_bandwidth(monkeypatch):
    """B200 <-> GB200 and MI325X <-> MI300X borrow from each other as soon as one has a figure."""
    from gpucluster.catalog.models import Sourced

    def with_figure(name: str, value: float):
        g = catalog.gpus.get(name)
        src = next(iter(g.sources))
        eff = g.efficiency.model_copy(update={"best_published_mfu": {"bf16": Sourced(value=value, source=src)}})
        return g.model_copy(update={"efficiency": eff})

    patched = {"GB200": with_figure("GB200", 0.5), "MI300X": with_figure("MI300X", 0.4)}
    items = catalog.gpus.items
    monkeypatch.setattr(catalog.gpus, "items", lambda: iter([(n, patched.get(n, g)) for n, g in items()]))
    for gpu, sibling, value in (("B200", "GB200", 0.5), ("MI325X", "MI300X", 0.4)):
        ref = mfu_reference(gpu, "bf16")
        assert ref is not None and ref.borrowed and (ref.from_gpu, ref.value) == (sibling, value)


def test_the_flag_is_above_the_reference_plus_the_margin_and_is_an_assumption():
    assert MARGIN == 0.0   # documented in plan/mfu_reference.py and docs/training.md
    at = confidence("A100-SXM4-80GB", Layout(precision="bf16"), A100_BF16)
    assert at.above_best_published is None
    above = confidence("A100-SXM4-80GB", Layout(precision="bf16"), 0.77)
    assert above.above_best_published and "Korthikanti" in above.above_best_published
    assert above.above_best_published in above.assumptions and above.level == "assumed"
    h200 = confidence("H200-SXM-141GB", Layout(precision="bf16"), 0.60)
    assert h200.above_best_published and "H100-SXM5-80GB" in h200.above_best_published
    assert f"{100 * H100_BF16:.1f}%" in h200.above_best_published and h200.above_best_published in h200.assumptions
    # below a borrowed reference: still an assumption, naming the sibling
    low = confidence("H200-SXM-141GB", Layout(precision="bf16"), 0.30)
    assert low.above_best_published is None
    assert any("nearest validated sibling" in a and "H100-SXM5-80GB" in a for a in low.assumptions)


def test_the_demo_plan_on_h200_is_flagged_citing_h100_in_terminal_json_and_html(tmp_path):
    from gpucluster.plan.train_request import plan_train
    from gpucluster.documents.plan_train import build
    from gpucluster.report.plan_report import train_report

    plan = plan_train("llama3-70b", cluster=str(ROOT / "examples/h200-256-ndr400.yaml"), tokens="2T")
    assert plan.best.mfu > H100_BF16
    doc = build(plan).dump()
    ref = plan.confidence.reference
    assert ref is not None
    assert doc["above_best_published"] and "H100-SXM5-80GB" in doc["above_best_published"]
    assert doc["above_best_published"] in doc["assumptions"]
    assert doc["mfu_reference"] == {"value": H100_BF16, "gpu": "H100-SXM5-80GB", "precision": "bf16",
                                    "borrowed": True, "source": ref.source, "margin": MARGIN}
    report = train_report(plan, plan.meta(), fixed=plan.fixed)
    assert any("Above the best published run" in c and "H100-SXM5-80GB" in c for c in report.conclusions)
    out = run("plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
              "--tokens", "2T", "--top", "1", check_rc=0)
    text = " ".join(out.stdout.split())
    assert "above the best published run" in text and "nearest validated sibling of H200-SXM-141GB" in text


def test_an_a100_plan_above_56_percent_lists_the_assumption():
    out = run("plan", "train", "--gpu", "A100-SXM4-80GB:8", "--nodes", "16", "--model", "gpt3-175b",
              "--tokens", "300B", "--json", check_rc=0)
    import json
    doc = json.loads(out.stdout)
    assert doc["best"]["mfu"] > A100_BF16
    assert doc["assumptions"] and doc["above_best_published"] in doc["assumptions"]
    assert doc["mfu_reference"]["gpu"] == "A100-SXM4-80GB" and doc["mfu_reference"]["borrowed"] is False


def test_a_sweep_row_is_flagged_whatever_it_keeps(tmp_path):
    from gpucluster.documents import parse
    from gpucluster.engines.sweep import run_point
    from gpucluster.report.ops_report import sweep_report

    cluster = str(ROOT / "examples/h200-256-ndr400.yaml")
    row = run_point(["plan", "train"], [], {"cluster": cluster, "model": "llama3-8b", "tokens": "100B"},
                    ["gpu_hours"], 60)
    assert row["ok"] and list(row["result"]) == ["gpu_hours"]
    assert row["flags"] and "H100-SXM5-80GB" in row["flags"][0] and "H200-SXM-141GB" in row["flags"][0]
    low = run_point(["plan", "train"], [], {"cluster": str(ROOT / "examples/h200-256-100gbe.yaml"),
                                            "model": "llama2-7b", "tokens": "100B"}, ["best.mfu"], 60)
    assert low["ok"] and low["result"]["best.mfu"] <= H100_BF16 and low["flags"] == []
    doc = parse("sweep", {"schema": "gpucluster-sweep/v1", "name": "s", "engine": "local", "ray_nodes": None,
                          "ok": 2, "failed": 0, "tasks": [{"params": {"n": 1}, **row}, {"params": {"n": 2}, **low}]})
    assert doc.dump()["tasks"][0]["flags"] == row["flags"]
    report = sweep_report(doc)
    table = report.tables[0]
    assert table.columns[-1] == "flags" and table.rows[0][-1] == row["flags"][0] and table.rows[1][-1] == ""
    assert report.conclusions[0].startswith("1 of 2 tasks are flagged")


def test_the_advice_never_calls_a_flagged_plan_used_well():
    from gpucluster.plan.train_request import plan_train

    plan = plan_train("llama3-70b", cluster=str(ROOT / "examples/h200-256-ndr400.yaml"), tokens="2T")
    assert plan.best.mfu > H100_BF16
    assert plan.advice.term == "compute"   # the advice that used to speak of a well-used cluster
    assert "used well" not in plan.advice.text
    assert "above the best published run on H100-SXM5-80GB" in plan.advice.text
