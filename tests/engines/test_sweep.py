"""Sweeps with local processes: results equal the serial run's; a failed task is reported with
its parameters and the rest complete; bad input is one line."""

import json

import pytest

from tests_cli_helpers import ROOT, assert_one_line_error, run

SWEEP = """name: t
command: [plan, train]
base: {tokens: 10B, gpu: "H100:8"}
grid:
  nodes: [1, 2]
  model: [llama2-7b, no-such-model]
keep: [best.step_s, best.layout.dp, gpu_hours]
"""


@pytest.fixture
def sweep_file(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(SWEEP)
    return p


def test_parallel_equals_serial_and_failures_reported(sweep_file):
    serial = run("sweep", str(sweep_file), "--workers", "1", "--json")
    par = run("sweep", str(sweep_file), "--workers", "4", "--json")
    assert serial.returncode == par.returncode == 1
    a, b = json.loads(serial.stdout), json.loads(par.stdout)
    assert a["tasks"] == b["tasks"]
    assert (a["ok"], a["failed"]) == (2, 2)
    bad = [t for t in a["tasks"] if not t["ok"]]
    assert all(t["params"]["model"] == "no-such-model" and "no-such-model" in t["error"] for t in bad)
    good = {t["params"]["nodes"]: t["result"] for t in a["tasks"] if t["ok"]}
    assert good[2]["best.layout.dp"] >= good[1]["best.layout.dp"]
    text = run("sweep", str(sweep_file), "--workers", "2").stdout
    assert "FAILED" in text and "model=no-such-model" in text and "2 ok, 2 failed" in text


def test_example_sweep_loads():
    from gpucluster.engines.sweep import load_sweep, tasks_of
    p = ROOT / "examples/sweeps/plan-grid.yaml"
    tasks = tasks_of(load_sweep(str(p)), p.parent)
    assert len(tasks) == 4 and all(t["cluster"].startswith("/") for t in tasks)


def test_bad_sweep(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ncommand: []\n")
    assert_one_line_error(run("sweep", str(p)), "command")


def test_points_run_in_process_not_as_a_subprocess(sweep_file, monkeypatch):
    """The sweep calls the API: no `gpucluster` command is started, locally (here, one worker)."""
    import subprocess

    from gpucluster.engines import sweep as sweep_mod

    def refuse(*a, **k):
        raise AssertionError("a sweep point started a subprocess")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    out = sweep_mod.sweep(str(sweep_file), workers=1)
    assert (out["ok"], out["failed"]) == (2, 2)
    assert all("no-such-model" in t["error"] for t in out["tasks"] if not t["ok"])


def test_only_allowed_commands_and_options(tmp_path):
    p = tmp_path / "cost.yaml"
    p.write_text("name: x\ncommand: [cost]\n")
    assert_one_line_error(run("sweep", str(p)), "command", "plan train")
    q = tmp_path / "opt.yaml"
    q.write_text('name: x\ncommand: [plan, train]\nbase: {model: llama2-7b, gpu: "H100:8", bogus: 1}\n')
    data = json.loads(run("sweep", str(q), "--json").stdout)
    assert data["tasks"][0]["error"] == "error: --bogus: no such option for plan train"


def test_a_point_past_its_timeout_is_reported(tmp_path):
    import gpucluster
    from gpucluster.engines import sweep as sweep_mod

    gpucluster.plan_train("llama2-7b", gpu="H100:8", tokens="1B", top=1)     # imports done: only the search is timed
    p = tmp_path / "slow.yaml"
    p.write_text('name: slow\ncommand: [plan, train]\nbase: {model: llama3-70b, gpu: "H100:8", nodes: 64}\n'
                 "timeout_s: 0.001\n")
    out = sweep_mod.sweep(str(p), workers=1)
    assert out["failed"] == 1 and out["tasks"][0]["error"] == "timed out after 0.001 s"
