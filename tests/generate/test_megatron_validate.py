"""Every ranked layout of a representative set of plans, as the generated job starts it, passes
Megatron-LM's own parse_args() + validate_args() (issue 22: 147 of 160 were refused).

The oracle is Megatron-LM at the pinned version in ../shared/frameworks (README there), run by
megatron_oracle.py in a child process. Each case is the exact argument list the generated job
passes to the training program (layout, model shape, data/tokenizer/checkpoint arguments with
the placeholders filled in as a user would), with the environment the job script sets
(CUDA_DEVICE_MAX_CONNECTIONS set or unset), WORLD_SIZE = the job's GPUs and RANK = 0 (what
torchrun gives a worker), and the GPU's compute capability major as the one thing a machine
without the GPU cannot report. One argument is added for this machine, not the job's:
`--no-rope-fusion`, because rope fusion needs Transformer Engine, which is not installed here
(the job's container has it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gen_helpers import ranked_docs, with_layout, write_plan

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from megatron_oracle import tree  # noqa: E402

FILLED = {"DATA_PATH": "/data/corpus_text_document", "TOKENIZER_MODEL": "/models/tokenizer",
          "CHECKPOINT_DIR": "/shared/checkpoints/run1"}
ARCH = {"H100-SXM5-80GB": 9, "H200-SXM-141GB": 9, "B200": 10}


def _why_not() -> str | None:
    if not (tree() / "megatron" / "training" / "arguments.py").exists():
        return f"Megatron-LM's megatron/training not at {tree()} (../shared/frameworks, README there)"
    probe = subprocess.run([sys.executable, "-c", "import torch, six, regex, triton"], capture_output=True, text=True)
    if probe.returncode:
        missing = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"
        return f"Megatron-LM's arguments.py imports need torch, six, regex, triton ({missing})"
    return None


_WHY = _why_not()
needs_oracle = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


def oracle(cases: list[dict]) -> list[dict]:
    p = subprocess.run([sys.executable, str(HERE / "megatron_oracle.py")], input=json.dumps(cases),
                       capture_output=True, text=True, timeout=900, env={**os.environ})
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def job_case(plan) -> dict:
    """The generated job's argv (placeholders filled) and environment, for the oracle."""
    from gpucluster.generate.quoting import Expand
    from gpucluster.generate.torchrun import Launch, megatron_program, shell_var

    res = megatron_program(plan, Launch(), shell_var, exit_mins=60, job=True)
    argv = [FILLED[w[1:]] if isinstance(w, Expand) else w for w in res.args]
    env = {"WORLD_SIZE": plan.gpus, "RANK": 0}
    env.update({k: v for k, v in res.env.items() if v is not None})
    return {"argv": [*argv, "--no-rope-fusion"], "env": env, "arch": ARCH.get(plan.gpu, 9)}


# Representative plans (conftest.PLANS): dense, GQA, MoE, MLA, CP, FSDP, CPU offload, FP8,
# uneven and interleaved pipelines, MoE all-to-all overlap.
PLANS = ["13b", "uneven", "zero3", "cp", "grid70", "moe", "dsv3", "fp8", "offload", "interleaved", "dualpipe"]


@needs_oracle
def test_every_ranked_layout_passes_megatron_lm(plan_doc, tmp_path):
    from gpucluster.errors import UserError
    from gpucluster.generate.plan_file import load_plan

    cases, names, refused = [], [], []
    features = set()
    for name in PLANS:
        for i, doc in enumerate(ranked_docs(plan_doc(name))):
            plan = load_plan(str(write_plan(tmp_path, doc, f"{name}{i}.json")))
            try:
                cases.append(job_case(plan))
            except UserError as exc:
                refused.append(f"{name}#{i}: {exc}")
                continue
            names.append(f"{name}#{i}")
            lay = plan.layout
            features |= {f for f, on in (("cp", lay["cp"] > 1), ("tp", lay["tp"] > 1), ("ep", lay["ep"] > 1),
                                         ("fsdp", lay["zero"] >= 2), ("offload", lay["offload_optimizer"]),
                                         ("fp8", lay["precision"] == "fp8"), ("interleave", lay["interleave"] > 1),
                                         ("pp", lay["pp"] > 1)) if on}
    # The representative set covers what the issue names.
    assert {"cp", "tp", "ep", "fsdp", "offload", "fp8", "interleave", "pp"} <= features, features
    assert not refused, refused
    assert len(cases) >= 150        # the issue fed 160; the planner's ranked layouts of eleven plans
    results = oracle(cases)
    bad = [f"{n}: {r['error']}\n  {' '.join(c['argv'])}" for n, c, r in zip(names, cases, results, strict=True) if not r["ok"]]
    assert not bad, f"{len(bad)} of {len(cases)} refused by Megatron-LM:\n" + "\n".join(bad[:10])


@needs_oracle
def test_the_oracle_refuses_what_the_issue_found(plan_doc, tmp_path):
    """The validator is live: the old job's omissions are refused, each for its reason."""
    from gpucluster.generate.plan_file import load_plan

    base = plan_doc("13b")   # tp=2, pp=2
    lay = base["best"]["layout"]
    plan = load_plan(str(write_plan(tmp_path, base, "tp.json")))
    ok = job_case(plan)
    no_env = {**ok, "env": {k: v for k, v in ok["env"].items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}}
    fsdp = load_plan(str(write_plan(tmp_path, with_layout(base, zero=3, pp=1, interleave=1, dp=lay["dp"] * 2), "fsdp.json")))
    fsdp_case = job_case(fsdp)
    fsdp_old = {**fsdp_case, "argv": [a for a in fsdp_case["argv"] if a != "--ckpt-format=fsdp_dtensor"]}
    off = load_plan(str(write_plan(tmp_path, with_layout(base, offload_optimizer=True), "off.json")))
    off_case = job_case(off)
    off_old = {**off_case, "argv": [a for a in off_case["argv"] if a != "--use-precision-aware-optimizer"]}
    fsdp_env = {**fsdp_case, "env": {**fsdp_case["env"], "CUDA_DEVICE_MAX_CONNECTIONS": "1"}}
    r = oracle([ok, no_env, fsdp_case, fsdp_old, off_case, off_old, fsdp_env])
    assert [x["ok"] for x in r] == [True, False, True, False, True, False, False], r
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in r[1]["error"] and "fsdp_dtensor" in r[3]["error"]
    assert "precision-aware" in r[5]["error"] and "CUDA_DEVICE_MAX_CONNECTIONS" in r[6]["error"]
