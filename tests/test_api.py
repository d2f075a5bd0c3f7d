"""The Python API: the same plan as the CLI, typed results, bad input as UserError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpucluster


def test_plan_train_from_python_equals_the_cli(tmp_path):
    plan = gpucluster.plan_train("llama3-8b", gpu="H100:8", nodes=2, tokens="100B", top=3)
    assert isinstance(plan, gpucluster.TrainingPlan)
    exe = str(Path(sys.executable).parent / "gpucluster")
    cli = json.loads(subprocess.run([exe, "plan", "train", "--model",
                                     "llama3-8b", "--gpu", "H100:8", "--nodes", "2", "--tokens", "100B",
                                     "--top", "3", "--json"], capture_output=True, text=True, check=True).stdout)
    assert cli["best"]["step_s"] == pytest.approx(plan.best.step_s)
    assert cli["assumptions"] == plan.confidence.assumptions
    assert plan.tokens_source == "given" and plan.tokens == 100 * 10**9


def test_stack_settings_and_bad_input():
    flash = gpucluster.plan_train("llama2-7b", gpu="A100:8", tokens=10**9, top=1)
    unfused = gpucluster.plan_train("llama2-7b", gpu="A100:8", tokens=10**9, top=1, attention="unfused")
    assert unfused.best.step_s > flash.best.step_s
    with pytest.raises(gpucluster.UserError, match="--attention"):
        gpucluster.plan_train("llama2-7b", gpu="A100:8", attention="fast")
    with pytest.raises(gpucluster.UserError, match="unknown"):
        gpucluster.plan_train("no-such-model", gpu="A100:8")
    with pytest.raises(AttributeError, match="public"):
        gpucluster.no_such_name  # noqa: B018


def test_import_is_light():
    out = subprocess.run([sys.executable, "-c", "import gpucluster, sys; print('numpy' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


ROOT = Path(__file__).resolve().parents[1]


def _cli_json(*args: str) -> dict:
    exe = str(Path(sys.executable).parent / "gpucluster")
    proc = subprocess.run([exe, *args, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_plan_serve_returns_the_document_the_cli_prints():
    plan = gpucluster.plan_serve("llama3-8b", rate="20", gpu="H100:8", slo_ttft=0.5, input_tokens=256)
    assert isinstance(plan, gpucluster.ServePlan)
    assert plan.best.replicas >= 1 and plan.request["slo_ttft_s"] == 0.5
    doc = plan.document()
    assert doc.best.operating_point.ttft_p99_s <= 0.5
    cli = _cli_json("plan", "serve", "--model", "llama3-8b", "--rate", "20", "--gpu", "H100:8", "--slo-ttft", "500ms",
                    "--input", "256")
    assert json.loads(json.dumps(doc.dump())) == cli
    with pytest.raises(gpucluster.UserError, match="--slo-tpot"):
        gpucluster.plan_serve("llama3-70b", rate=1000, gpu="H100:8", slo_tpot="1us")
    with pytest.raises(gpucluster.UserError, match="--rate"):
        gpucluster.plan_serve("llama3-8b", rate=-1, gpu="H100:8")


def test_check_returns_the_findings():
    report = gpucluster.check(str(ROOT / "examples/h200-256-100gbe.yaml"),
                              jobs=[str(ROOT / "examples/jobs/seed-train-70b.sbatch")])
    assert isinstance(report, gpucluster.CheckReport)
    assert report.exit_code == 1 and report.counts["error"] >= 1
    assert "ethernet-training" in {f.rule for f in report.findings}
    assert report.document().findings[0].rule == report.findings[0].rule
    only = gpucluster.check(str(ROOT / "examples/h200-256-100gbe.yaml"), rules=["ethernet-training"])
    assert {f.rule for f in only.findings} == {"ethernet-training"}
    with pytest.raises(gpucluster.UserError, match="--fail-on"):
        gpucluster.check(str(ROOT / "examples/h200-256-100gbe.yaml"), fail_on="never")


def test_simulate_from_a_path_or_a_loaded_scenario():
    from gpucluster.specs.scenario import load_scenario

    path = str(ROOT / "examples/scenarios/shared-vs-partitioned.yaml")
    run = gpucluster.simulate(path, policy="backfill", seed=3)
    assert isinstance(run, gpucluster.SimulationRun)
    assert run.summary["policy"] == "backfill" and run.summary["seed"] == 3 and run.jobs
    again = gpucluster.simulate(load_scenario(path), policy="backfill", seed=3)
    assert again.document().utilization.allocation == run.document().utilization.allocation
    with pytest.raises(gpucluster.UserError, match="policy"):
        gpucluster.simulate(path, policy="no-such-policy")


def test_document_models_are_public():
    model = gpucluster.document_model("plan-train")
    assert model.model_json_schema(by_alias=True)["properties"]["schema"]["const"] == "gpucluster-plan-train/v1"


def test_check_and_validate_stay_callable_once_their_packages_are_imported():
    """`gpucluster.check` is also a package: importing it (the CLI does) must not hide the function."""
    code = ("import gpucluster.check.engine, gpucluster.validate.runner, gpucluster;"
            "r = gpucluster.check('examples/h200-256-ndr400.yaml', rules=['rack-power']);"
            "rows = gpucluster.validate('validation/training-llama3-meta.yaml');"
            "print(type(r).__name__, len(rows) > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["CheckReport", "True"]
