"""The mixed-generation example (A100 + H100) for the heterogeneous scheduler: run times per GPU
type come from the training planner, are shown per type, and a type the model does not fit on
gets no speed (it was scaled from peak FLOP/s before)."""

from __future__ import annotations

import re
from pathlib import Path

from gpucluster.sim.request import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scenarios" / "mixed-a100-h100.yaml"


def test_the_example_shows_the_planners_speed_per_gpu_type() -> None:
    run = simulate(EXAMPLE, policy="hetero")
    s = run.summary
    assert s["jobs"]["completed"] == s["jobs"]["total"]
    notes = [n for n in s["notes"] if "planner" in n]
    assert len(notes) == 3                       # (pretrain, 16), (pretrain, 32), (finetune, 8)
    for note in notes:
        m = re.search(r"A100-SXM4-80GB ([\d.]+) h, H100-SXM5-80GB ([\d.]+) h \(([\d.]+)x\)", note)
        assert m, note
        a100_h, h100_h, speed = (float(x) for x in m.groups())
        assert 1.5 < speed < 3.2                 # between no gain and the bf16 peak ratio (989 / 312)
        assert abs(a100_h / h100_h - speed) < 0.02 * speed
    # every job runs at the speeds the notes state
    fine = next(j for j in run.jobs if j.cls == "finetune-7b")
    m = re.search(r"finetune-7b: 8 GPUs -> .*\(([\d.]+)x\)", " ".join(notes))
    assert m and abs(fine.speeds["H100-SXM5-80GB"] - float(m.group(1))) < 0.01
    assert fine.speeds["A100-SXM4-80GB"] == 1.0


def test_a_type_the_model_does_not_fit_gets_no_speed(tmp_path) -> None:
    p = tmp_path / "fit.yaml"
    p.write_text("""
name: fit
cluster:
  name: h100-t4
  node_pools:
    - {name: h100, count: 1, gpu: "H100:8", cpu_cores: 96, ram_gib: 2048, nics_per_node: 8, nic: NDR400}
    - {name: t4, count: 1, gpu: "T4:8", cpu_cores: 32, ram_gib: 256, nics_per_node: 1, nic: HDR200}
  fabric: {topology: fat-tree, switch: QM9700}
workloads:
  - kind: training
    name: big
    arrivals: {process: once, count: 1}
    gpus: 8
    model: llama3-70b
    tokens: 100M
""")
    run = simulate(p, policy="backfill")
    job = run.jobs[0]
    assert job.speeds["T4"] == 0.0 and job.speeds["H100-SXM5-80GB"] == 1.0
    assert any("T4 does not fit" in n for n in run.summary["notes"])
    assert job.gpu_type == "H100-SXM5-80GB"
