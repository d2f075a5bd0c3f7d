"""`--html` through the real console script: the report is written, stdout stays clean."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "gpucluster"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def test_plan_train_json_and_html(tmp_path):
    out = tmp_path / "plan.html"
    proc = run("plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
               "--tokens", "2T", "--json", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "gpucluster-plan-train/v1"
    assert str(out) in proc.stderr and out.stat().st_size > 1_000_000
    page = out.read_text()
    for fig in ("step-breakdown", "memory", "scaling", "top-layouts"):
        assert f'data-figure="{fig}"' in page


def test_plan_serve_html(tmp_path):
    out = tmp_path / "serve.html"
    proc = run("plan", "serve", "--model", "llama3-8b", "--rate", "20", "--gpu", "H100:8", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert 'data-figure="serving-curve"' in page and 'data-figure="serving-options"' in page


def test_html_into_a_missing_folder_is_one_line_error(tmp_path):
    proc = run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--html", str(tmp_path / "no/r.html"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--html" in proc.stderr and "does not exist" in proc.stderr


SCENARIO = """name: tiny-shared-pool
cluster: {cluster}
horizon_days: 4
seed: 3
policy: fifo
workloads:
  - kind: training
    name: team
    arrivals: {{per_day: 6}}
    gpus: {{dist: choice, values: [1, 4, 8, 16]}}
    duration_hours: {{dist: lognormal, median: 3, sigma: 1.0, max: 48}}
"""


def tiny_scenario(folder: Path) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(SCENARIO.format(cluster=ROOT / "examples/h100-64-ib.yaml"))
    return path


def test_ops_commands_write_reports(tmp_path):
    cases = {
        "cost": (["cost", "examples/seed-figures/tco-512-h200.yaml"], ["build-vs-rent"]),
        "reliability": (["reliability", "examples/h200-256-ndr400.yaml", "--interval", "30m"],
                        ["mtbf", "goodput-vs-interval", "checkpoint-timeline"]),
        "check": (["check", "examples/h200-256-100gbe.yaml", "--job", "examples/jobs/bad-train.sbatch"], []),
        "compare": (["simulate", "compare", str(tiny_scenario(tmp_path)), "--policies", "fifo,sjf"],
                    ["utilization", "jct"]),
        "simulate": (["simulate", str(tiny_scenario(tmp_path))], ["utilization", "jct"]),
    }
    for name, (args, figures) in cases.items():
        out = tmp_path / f"{name}.html"
        proc = run(*args, "--html", str(out))
        assert proc.returncode in (0, 1), proc.stderr
        page = out.read_text()
        for fig in figures:
            assert f'data-figure="{fig}"' in page, (name, fig)
        assert page.count('class="plot"') == len(figures), name


def bench_result(folder: Path, busbw: float = 10.0) -> Path:
    """A `bench collective --json` result of 2 nodes x 8 GPUs (synthetic numbers)."""
    sizes = [1 << 20, 1 << 24, 1 << 28, 1 << 30]
    data = {"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "backend": "nccl", "world_size": 16,
            "nodes": 2, "ranks_per_node": 8, "wrong_total": 0,
            "node_ranks": {f"gpu{i:02d}": list(range(i * 8, (i + 1) * 8)) for i in range(2)},
            "rows": [{"size_bytes": s, "busbw_gbps": busbw, "algbw_gbps": busbw / 2, "time_us": 1.0, "wrong": 0}
                     for s in sizes]}
    path = folder / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_fabric_commands_write_bandwidth_reports(tmp_path):
    out = tmp_path / "comm.html"
    assert run("comm", "--gpu", "H100:8", "--gpus", "16", "--html", str(out)).returncode == 0
    assert 'data-figure="bandwidth"' in out.read_text()
    out = tmp_path / "diagnose.html"
    proc = run("diagnose", "--cluster", "examples/h100-64-ib.yaml", str(bench_result(tmp_path)), "--html", str(out))
    assert proc.returncode == 1, proc.stderr
    page = out.read_text()
    assert 'data-figure="bandwidth-scale-out"' in page and "measured" in page


def test_sweep_html(tmp_path):
    out = tmp_path / "sweep.html"
    proc = run("sweep", "examples/sweeps/plan-grid.yaml", "--workers", "2", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert 'data-figure="sweep-best.step_s"' in page and 'data-figure="sweep-gpu_hours"' in page
