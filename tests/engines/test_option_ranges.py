"""Caps before work and ranges on options (issue 23 items 3, 4, 6): each case was a traceback, a
hang, a memory blow-up or a wrong accept; now one line, exit 2, quickly."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from fuzz_oracle import classify, run_in_process

ROOT = Path(__file__).resolve().parents[2]
GRID = "name: big\ncommand: [plan, train]\nbase: {{model: llama2-7b, gpu: 'H100:8'}}\ngrid: {{{}}}\n".format(", ".join(
    f"k{i}: [1, 2]" for i in range(22)))
BATCH = """name: b
cluster: %s
horizon_days: 1
workloads:
  - kind: batch
    name: many
    arrivals: {process: once, count: 1}
    tasks: 100000000
    task_hours: 1
""" % (ROOT / "examples" / "h200-256-ndr400.yaml")

CASES = [
    (["advise", "--model", "llama2-7b", "--months", "nan"], "--months"),
    (["advise", "--model", "llama2-7b", "--rate", "1e308"], "--rate"),
    (["plan", "serve", "--model", "llama2-7b", "--gpu", "H100:8", "--rate", "1e12"], "--rate"),
    (["plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--nodes", "1000000000000000"], "--nodes"),
    (["plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--global-batch", str(2**31)], "--global-batch"),
    (["bench", "storage", ".", "--size", str(2**63)], "--size"),
    (["bench", "storage", ".", "--block", str(2**63)], "--block"),
    (["bench", "storage", ".", "--size", "1e999"], "--size"),
    (["bench", "collective", "--local", "1000000"], "--local"),
    (["bench", "collective", "--timeout", "nan"], "--timeout"),
    (["bench", "collective", "--timeout", "inf"], "--timeout"),
    (["sweep", "grid.yaml"], "grid"),
    (["simulate", "batch.yaml"], "tasks"),
]


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_refused_with_its_range_before_work(tmp_path, argv, needle):
    (tmp_path / "grid.yaml").write_text(GRID)
    (tmp_path / "batch.yaml").write_text(BATCH)
    start = time.monotonic()
    code, out, err = run_in_process(argv, timeout_s=60, cwd=tmp_path)
    assert not classify(code, out, err, refuse=True), (code, out, err)
    assert code == 2 and needle in err, err
    assert time.monotonic() - start < 20


def test_bench_storage_checks_free_space_first(tmp_path):
    import os
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    if free > 1 << 40:
        pytest.skip("more than 1 TiB free: the size cap answers first")
    code, _out, err = run_in_process(["bench", "storage", str(tmp_path), "--size", str(max(free, 1 << 30))],
                                    timeout_s=60, cwd=tmp_path)
    assert code == 2 and "free" in err
    assert not list(tmp_path.iterdir())


CASE = """schema: gpucluster-validation/v1
cases:
  - id: c1
    kind: collective
    hardware: {gpu: H100-SXM5-80GB, gpus: 8, gpus_per_node: 8}
    collective: {op: all_reduce, bytes: 1048576, gpus: GPUS, gpus_per_node: 8}
    measured: {busbw_gbps: MEASURED}
"""


@pytest.mark.parametrize("gpus,measured", [(8, ".nan"), (8, ".inf"), (0, 43.7), (-8, 43.7)])
def test_validate_refuses_a_nan_measurement_or_zero_gpus(tmp_path, gpus, measured):
    (tmp_path / "v.yaml").write_text(CASE.replace("GPUS", str(gpus)).replace("MEASURED", str(measured)))
    code, out, err = run_in_process(["validate", "v.yaml"], cwd=tmp_path)
    assert code == 2 and not classify(code, out, err, refuse=True), err


@pytest.mark.parametrize("nodes", ["-3", "0", "abc", str(2**64), "1e9", "4-2"])
def test_check_reads_an_impossible_sbatch_nodes_as_a_finding(tmp_path, nodes):
    """issue 23 item 7: never silently "the whole pool"."""
    import json
    (tmp_path / "j.sbatch").write_text(f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --gres=gpu:8\nsrun x\n")
    code, out, err = run_in_process(["check", str(ROOT / "examples" / "h200-256-ndr400.yaml"), "--job", "j.sbatch",
                                     "--json"], cwd=tmp_path)
    assert code == 1 and not classify(code, out, err)
    found = [f for f in json.loads(out)["findings"] if f["rule"] == "sbatch-gres" and "--nodes=" in f["title"]]
    assert found and nodes[:40] in found[0]["title"]


def test_check_flags_zero_gpus_per_node(tmp_path):
    import json
    (tmp_path / "j.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gres=gpu:0\nsrun x\n")
    code, out, _err = run_in_process(["check", str(ROOT / "examples" / "h200-256-ndr400.yaml"), "--job", "j.sbatch",
                                     "--json"], cwd=tmp_path)
    assert code == 1 and any("0 GPUs per node" in f["title"] for f in json.loads(out)["findings"])


@pytest.mark.parametrize("value", ["0", "-5", "0.0", "1e12", ".inf"])
@pytest.mark.parametrize("kind", ["training", "trace"])
def test_scenario_checkpoint_minutes_refused_with_its_range(tmp_path, value, kind):
    """issue 23 item 6: `checkpoint_minutes: 0` was a silent "no checkpoints"; no checkpoints is the
    absent field (or null), and every other value is in (0, 10 years]."""
    body = ("  - {kind: training, name: t, arrivals: {process: once, count: 1}, gpus: 8, duration_hours: 1, "
            "checkpoint_minutes: VALUE}\n" if kind == "training" else
            "  - {kind: trace, name: t, format: gavel, path: x.trace, checkpoint_minutes: VALUE}\n")
    (tmp_path / "s.yaml").write_text(f"name: s\ncluster: {ROOT / 'examples' / 'h200-256-ndr400.yaml'}\n"
                                     "horizon_days: 1\nworkloads:\n" + body.replace("VALUE", value))
    code, out, err = run_in_process(["simulate", "s.yaml"], timeout_s=60, cwd=tmp_path)
    assert code == 2 and not classify(code, out, err, refuse=True), (code, out, err)
    assert "s.yaml:5: workloads[0].checkpoint_minutes" in err, err
    assert ("finite" if value == ".inf" else "(0, 5,256,000] minutes; leave it out (or null) for no checkpoints") in err


def test_scenario_without_checkpoints_is_the_absent_or_null_field():
    from gpucluster.specs.scenario import Training
    base = {"kind": "training", "name": "t", "arrivals": {"process": "once", "count": 1}, "gpus": 8,
            "duration_hours": 1}
    assert Training.model_validate(base).checkpoint_minutes is None
    assert Training.model_validate(base | {"checkpoint_minutes": None}).checkpoint_minutes is None
    assert Training.model_validate(base | {"checkpoint_minutes": 30}).checkpoint_minutes == 30


def test_bench_collective_local_is_bounded_by_the_cores(tmp_path):
    """issue 23 item 3: `--local` allowed max(8, cores) ranks; more ranks than cores now needs an
    explicit --oversubscribe, and that is bounded too."""
    import os
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    code, out, err = run_in_process(["bench", "collective", "--local", str(cores + 1)], timeout_s=60, cwd=tmp_path)
    assert code == 2 and not classify(code, out, err, refuse=True), err
    assert "--local" in err and f"1..{cores} (this machine's cores)" in err and "--oversubscribe" in err, err
    code, out, err = run_in_process(["bench", "collective", "--local", str(max(8, 4 * cores) + 1), "--oversubscribe"],
                                    timeout_s=60, cwd=tmp_path)
    assert code == 2 and "--local" in err, err
