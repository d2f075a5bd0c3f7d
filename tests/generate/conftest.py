import copy
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from tests_cli_helpers import run

# Real plans (the planner's own JSON), one `plan train` run each, shared by the generator tests.
PLANS = {
    "13b": ("--cluster", "examples/h100-64-ib.yaml", "--model", "llama2-13b", "--tokens", "100B",
            "--layout", "tp=2,pp=2"),
    # 80 layers on 32 stages: the uneven split.
    "uneven": ("--gpu", "H100:8", "--nodes", "32", "--model", "llama3-70b", "--tokens", "1T",
               "--layout", "tp=8,pp=32"),
    # The demo's 70B plan with no TP/PP: ZeRO-3 (282 GB per GPU without it).
    "zero3": ("--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b", "--tokens", "2T",
              "--layout", "tp=1,pp=1,zero=3"),
    "cp": ("--gpu", "H100:8", "--nodes", "8", "--model", "llama3-8b", "--tokens", "100B", "--seq-len", "65536",
           "--layout", "tp=2,pp=2,cp=4", "--top", "20"),
    "grid70": ("--gpu", "H100:8", "--nodes", "32", "--model", "llama3-70b", "--tokens", "1T", "--top", "40"),
    "moe": ("--gpu", "H100:8", "--nodes", "16", "--model", "Mixtral-8x7B", "--tokens", "100B", "--top", "40"),
    "dsv3": ("--gpu", "H100:8", "--nodes", "64", "--model", "DeepSeek-V3", "--tokens", "100B", "--top", "40"),
}


@pytest.fixture(scope="session")
def plan_doc():
    """name -> the plan document (a fresh deep copy each call, free to mutate)."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            proc = run("plan", "train", *PLANS[name], "--json", check_rc=0)
            cache[name] = json.loads(proc.stdout)
        return copy.deepcopy(cache[name])
    return get
