"""Every output path goes through one writer (output_file.py) that turns every OS error into one
line (issue 23 item 5), and Ctrl-C in `simulate` exits 130 with the partial result marked and the
events written so far kept (item 9), never a 0-byte --events file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from fuzz_oracle import classify, run_in_process

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = str(ROOT / "examples" / "scenarios" / "shared-vs-partitioned.yaml")
SWEEP = "name: s\ncommand: [plan, train]\nbase: {model: llama2-7b, gpu: 'H100:8', tokens: 1B}\ngrid: {nodes: [1]}\n"
LONG = "a" * 300


def _bad_targets(tmp_path: Path) -> dict[str, str]:
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    return {"long": str(tmp_path / (LONG + ".x")), "loop": str(tmp_path / "loop"), "fifo": str(tmp_path / "fifo"),
            "full": "/dev/full", "folder": str(tmp_path / "folder"), "missing": str(tmp_path / "no" / "x"),
            "nul": str(tmp_path / "a\x00b")}


COMMANDS = {
    "sweep -o": lambda t, sweep: ["sweep", sweep, "-o", t, "--workers", "1"],
    "sweep --html": lambda t, sweep: ["sweep", sweep, "--html", t, "--workers", "1"],
    "plan --html": lambda t, sweep: ["plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--tokens", "1B",
                                     "--html", t],
    "metrics -o": lambda t, sweep: ["metrics", str(ROOT / "tests" / "engines" / "data" / "none.json"), "-o", t],
    "bench storage --metrics": lambda t, sweep: ["bench", "storage", str(Path(sweep).parent), "--size", "1M",
                                                 "--metrics", t],
    "simulate --events": lambda t, sweep: ["simulate", SCENARIO, "--events", t],
    "slurm import -o": lambda t, sweep: ["slurm", "import", "-o", t],
    "slurm import --scenario": lambda t, sweep: ["slurm", "import", "-o", str(Path(sweep).parent / "t.txt"),
                                                 "--scenario", t, "--cluster", str(ROOT / "examples" /
                                                                                  "h200-256-ndr400.yaml")],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("target", ["long", "loop", "fifo", "full", "folder", "missing", "nul"])
def test_a_bad_output_path_is_one_line_before_any_work(tmp_path, command, target):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP)
    path = _bad_targets(tmp_path)[target]
    argv = COMMANDS[command](path, str(sweep))
    start = time.monotonic()
    code, out, err = run_in_process(argv, timeout_s=60, cwd=tmp_path)
    assert not classify(code, out, err), (code, err)
    assert code == 2, (code, out, err)
    assert len(err) < 600
    assert time.monotonic() - start < 20          # refused before the run, not after it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _start_simulate(tmp_path: Path) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "gpucluster"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([str(exe), "simulate", SCENARIO, "--json", "--events", str(tmp_path / "ev.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


def test_ctrl_c_in_simulate_exits_130_with_the_partial_result(tmp_path):
    p = _start_simulate(tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:    # the run has started once events reach the temporary file
        tmp = [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]
        if tmp and tmp[0].stat().st_size > 0:
            break
        if p.poll() is not None:
            pytest.skip("the run ended before it could be interrupted")
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert json.loads(out)["partial"] is True
    assert "partial" in err and "Traceback" not in err
    assert (tmp_path / "ev.jsonl").stat().st_size > 0
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


def test_ctrl_c_before_the_run_leaves_no_events_file(tmp_path, monkeypatch):
    import gpucluster.sim.request

    def interrupted(*args, **kwargs):     # Ctrl-C while the simulation is being built
        raise KeyboardInterrupt

    monkeypatch.setattr(gpucluster.sim.request, "simulate", interrupted)
    code, out, err = run_in_process(["simulate", SCENARIO, "--events", "ev.jsonl"], cwd=tmp_path)
    assert code == 130, (out, err)
    assert not list(tmp_path.iterdir())   # neither a 0-byte ev.jsonl nor a temporary file
