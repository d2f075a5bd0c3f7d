import copy
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from tests_cli_helpers import ROOT

# Real plans (the planner's own JSON), one `plan train` run each, shared by the generator tests.
PLANS = {
    "13b": ("--cluster", "examples/h100-64-ib.yaml", "--model", "llama2-13b", "--tokens", "100B",
            "--layout", "tp=2,pp=2"),
    # 80 layers on 32 stages: the uneven split.
    "uneven": ("--gpu", "H100:8", "--nodes", "32", "--model", "llama3-70b", "--tokens", "1T",
               "--layout", "tp=8,pp=32"),
    # The demo's 70B plan with no TP/PP: ZeRO-3 (282 GB per GPU without it).
    "zero3": ("--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b", "--tokens", "2T",
              "--layout", "tp=1,pp=1,cp=1,zero=3"),
    "cp": ("--gpu", "H100:8", "--nodes", "8", "--model", "llama3-8b", "--tokens", "100B", "--seq-len", "65536",
           "--layout", "tp=2,pp=2,cp=4", "--top", "20"),
    "grid70": ("--gpu", "H100:8", "--nodes", "32", "--model", "llama3-70b", "--tokens", "1T", "--top", "40"),
    "moe": ("--gpu", "H100:8", "--nodes", "16", "--model", "Mixtral-8x7B", "--tokens", "100B", "--top", "40"),
    "dsv3": ("--gpu", "H100:8", "--nodes", "64", "--model", "DeepSeek-V3", "--tokens", "100B", "--top", "40"),
    # The rest of the representative set Megatron-LM's validator sees (test_megatron_validate.py).
    "fp8": ("--gpu", "H100:8", "--nodes", "16", "--model", "llama3-70b", "--tokens", "1T", "--precision", "fp8",
            "--top", "20"),
    "offload": ("--gpu", "H100:8", "--nodes", "1", "--model", "llama3-70b", "--tokens", "10B",
                "--layout", "offload_optimizer=true", "--top", "10"),
    "dualpipe": ("--gpu", "H100:8", "--nodes", "16", "--model", "Mixtral-8x7B", "--tokens", "100B",
                 "--moe-overlap", "dualpipe", "--top", "20"),
    "interleaved": ("--gpu", "H100:8", "--nodes", "32", "--model", "llama3-405b", "--tokens", "1T",
                    "--layout", "tp=8,pp=16", "--top", "20"),
}


def _plan_json(*args: str) -> dict:
    """`gpucluster plan train ARGS --json` through the console script's entry point, in this
    process (a subprocess per plan cost a second of start-up each, in every xdist worker)."""
    import contextlib
    import io

    from gpucluster.cli.app import main

    out, old_argv, old_cwd = io.StringIO(), sys.argv, os.getcwd()
    sys.argv = ["gpucluster", "plan", "train", *args, "--json"]
    os.chdir(ROOT)
    code: object = 0
    try:
        with contextlib.redirect_stdout(out):
            main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    assert code in (0, None), (code, out.getvalue()[-2000:])
    return json.loads(out.getvalue())


@pytest.fixture(scope="session")
def plan_doc():
    """name -> the plan document (a fresh deep copy each call, free to mutate)."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = _plan_json(*PLANS[name])
        return copy.deepcopy(cache[name])
    return get
