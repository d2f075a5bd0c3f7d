"""`plan train`'s time with failures uses the checkpoint interval the generated job writes:
the plan's `with_failures.save_interval_iterations` is the `--save-interval` of `generate slurm`
run on the same plan document with the plan's `generate_flags`, and the interval in seconds is
`generate`'s own `checkpointing()` result, for the default storage assumption, a given write
bandwidth, a cluster's storage tiers (local NVMe + async copy) and a given interval."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "documents"))

from doc_helpers import invoke, json_of

from gpucluster.generate.megatron_job import DEFAULT_WRITE_GBPS, checkpointing
from gpucluster.generate.megatron_model import model_spec
from gpucluster.generate.plan_file import load_plan
from gpucluster.plan.train_goodput import DEFAULT_CHECKPOINT_WRITE_GBPS

CASES = {
    "default-storage": ("--gpu", "H100:8", "--nodes", "16", "--model", "llama3-70b", "--tokens", "1T"),
    "given-gbps": ("--gpu", "H100:8", "--nodes", "16", "--model", "llama3-70b", "--tokens", "1T",
                   "--checkpoint-write-gbps", "2.5"),
    "cluster-tiers": ("--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b", "--tokens", "2T"),
    "cluster-nfs": ("--cluster", "examples/h100-64-ib.yaml", "--model", "llama2-13b", "--tokens", "100B"),
    "given-interval": ("--gpu", "H100:8", "--nodes", "4", "--model", "llama3-8b", "--tokens", "100B",
                       "--checkpoint-interval", "30m"),
    "amd": ("--gpu", "MI300X:8", "--nodes", "8", "--model", "llama3-70b", "--tokens", "500B",
            "--checkpoint-write-gbps", "40"),
}


def test_the_default_write_bandwidth_is_generates() -> None:
    assert DEFAULT_CHECKPOINT_WRITE_GBPS == DEFAULT_WRITE_GBPS


def _ck_options(flags: list[str]) -> dict[str, str | float | None]:
    opts: dict[str, str | float | None] = {"cluster": None, "write_gbps": None, "interval": None}
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    if "--cluster" in pairs:
        opts["cluster"] = str(Path(__file__).resolve().parents[2] / pairs["--cluster"])
    if "--checkpoint-write-gbps" in pairs:
        opts["write_gbps"] = float(pairs["--checkpoint-write-gbps"])
    opts["interval"] = pairs.get("--checkpoint-interval")
    return opts


@pytest.mark.parametrize("case", list(CASES))
def test_plan_and_generated_job_checkpoint_at_the_same_interval(case: str, tmp_path: Path) -> None:
    doc = json_of("plan", "train", *CASES[case], "--top", "1")
    w = doc["with_failures"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))

    # generate's own function, on the document as generate reads it
    job = load_plan(str(path))
    ck = checkpointing(job, model_spec(job), **_ck_options(w["generate_flags"]))  # type: ignore[arg-type]
    assert ck.save_interval == w["save_interval_iterations"]
    assert ck.interval_s == w["checkpoint_interval_s"]
    assert ck.mtbf_s == pytest.approx(w["mtbf_s"], rel=1e-12)
    assert ck.write_s == pytest.approx(w["checkpoint_write_s"], rel=1e-12)
    # generate's goodput is Daly's model at the interval before rounding to whole iterations
    assert ck.goodput == pytest.approx(w["goodput"], rel=1e-3)

    # and the job file the CLI writes
    res = invoke("generate", "slurm", str(path), *w["generate_flags"])
    assert res.exit_code == 0, res.output
    saves = re.findall(r"--save-interval=(\d+)", res.stdout)
    assert saves and {int(s) for s in saves} == {w["save_interval_iterations"]}


def test_a_given_interval_is_the_interval_used() -> None:
    doc = json_of("plan", "train", *CASES["given-interval"], "--top", "1")
    w = doc["with_failures"]
    assert w["checkpoint_interval_source"] == "given"
    step = doc["best"]["step_s"]
    assert abs(w["checkpoint_interval_s"] - 1800) <= step / 2 + 1e-9
    assert w["generate_flags"][-2:] == ["--checkpoint-interval", "1800"]
