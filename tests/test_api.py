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
