"""A generated job chain resumes after a TIMEOUT, on a real Slurm 22.05 (slurm_cluster.py).

The plan is a real one for the test cluster (2 nodes of 8 H200), with its step time and length
shortened so the run takes ~100 s of training against a 1-minute time limit. `torchrun` is a
stand-in trainer (first rank only) that does what Megatron-LM does with the generated
arguments: resumes from `--load`'s latest_checkpointed_iteration.txt, trains to
`--train-iters`, and saves every `--save-interval` iterations.

Expected: the first job hits its time limit (TIMEOUT) after saving some checkpoints; the job it
submitted (afterany) resumes from the last one (not from 0) and completes the run; the next one
finds training done and ends at once. Nothing is left queued."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from slurm_cluster import SlurmCluster, why_not
from tests_cli_helpers import EXE

_why = why_not()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

ITERS, STEP_S, EVERY_S = 200, 0.5, "5s"    # 100 s of training, a checkpoint every 10 iterations

TRAINER = r'''#!/usr/bin/env python3
import os, sys, time
if os.environ.get("SLURM_PROCID", "0") != "0":
    sys.exit(0)
argv = sys.argv[1:]
def opt(name):
    for i, a in enumerate(argv):
        if a == name:
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
iters, every, save, load = int(opt("--train-iters")), int(opt("--save-interval")), opt("--save"), opt("--load")
marker = os.path.join(load, "latest_checkpointed_iteration.txt")
start = int(open(marker).read()) if os.path.exists(marker) else 0
with open(os.path.join(save, "log"), "a") as log:
    log.write(f"start {os.environ['SLURM_JOB_ID']} {start}\n")
for it in range(start + 1, iters + 1):
    time.sleep(STEP)
    if it % every == 0 or it == iters:
        tmp = os.path.join(save, "tmp")
        with open(tmp, "w") as f:
            f.write(str(it))
        os.replace(tmp, os.path.join(save, "latest_checkpointed_iteration.txt"))
'''


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


def _plan(slurm, tmp_path: Path) -> Path:
    p = subprocess.run([str(EXE), "plan", "train", "--gpu", "H200:8", "--nodes", "2", "--model", "llama2-7b",
                        "--tokens", "10B", "--json"], capture_output=True, text=True, env=slurm.env, timeout=240)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    doc["best"]["step_s"], doc["steps"] = STEP_S, ITERS
    out = tmp_path / "plan.json"
    out.write_text(json.dumps(doc))
    return out


def _state(slurm, job: str) -> str:
    out = slurm.run(["scontrol", "show", "job", job], check=False).stdout
    m = re.search(r"JobState=(\w+)", out)
    return m.group(1) if m else "?"


def test_chain_resumes_after_timeout(slurm, tmp_path):
    plan = _plan(slurm, tmp_path)
    script = tmp_path / "train.sbatch"
    g = subprocess.run([str(EXE), "generate", "slurm", str(plan), "--gres-type", "h200", "--time", "1",
                        "--checkpoint-interval", EVERY_S, "-o", str(script)],
                       capture_output=True, text=True, env=slurm.env, timeout=240)
    assert g.returncode == 0, g.stderr
    text = script.read_text()
    assert f"--train-iters={ITERS}" in text and "--save-interval=10" in text and "afterany" in text
    bin_dir, ckpt = tmp_path / "bin", tmp_path / "ckpt"
    bin_dir.mkdir()
    ckpt.mkdir()
    (bin_dir / "torchrun").write_text(TRAINER.replace("STEP", str(STEP_S)))
    (bin_dir / "torchrun").chmod(0o755)
    env = {**slurm.env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DATA_PATH": "/data/x",
           "TOKENIZER_MODEL": "/tok", "CHECKPOINT_DIR": str(ckpt)}
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=30)
    assert sub.returncode == 0, sub.stderr
    first = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        if not slurm.run(["squeue", "-h"], check=False).stdout.strip():
            break
        time.sleep(3)
    starts = [line.split() for line in (ckpt / "log").read_text().splitlines()]
    jobs = [j for _, j, _ in starts]
    assert slurm.run(["squeue", "-h"], check=False).stdout.strip() == "", "the chain did not end"
    assert jobs[0] == first and _state(slurm, first) == "TIMEOUT", (starts, _state(slurm, first))
    # The second job resumed from a checkpoint of the first, not from 0, and finished the run.
    resumed = int(starts[1][2])
    assert resumed > 0 and resumed % 10 == 0, starts
    assert len(starts) == 2 and _state(slurm, jobs[1]) == "COMPLETED", starts
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == str(ITERS)
    # The third link found training done and ended at once.
    outs = sorted(tmp_path.glob("slurm-*.out")) + sorted(Path(slurm.root).glob("slurm-*.out"))
    assert any("training done" in o.read_text() for o in outs), [o.name for o in outs]
