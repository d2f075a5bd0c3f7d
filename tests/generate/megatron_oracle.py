"""Megatron-LM's own argument validation as a test oracle, run in a child process.

Usage (what tests/generate/test_megatron_validate.py does): write a JSON list of cases to this
script's stdin, each {"argv": [...], "env": {...}, "arch": 9}; it prints one JSON list of
results, {"ok": true} or {"ok": false, "error": "..."}, in the same order.

Why a child process: Megatron-LM's `megatron/training` is not in the megatron-core wheel, so
the tree in ../shared/frameworks/megatron-lm-core_v0.16.1 (README there) must be first on
sys.path, and `megatron` must not already be imported from the wheel (other tests import it);
and `validate_args` reads the process environment (CUDA_DEVICE_MAX_CONNECTIONS, WORLD_SIZE, RANK),
which each case sets for itself.

What is stubbed, and only that (the validator's own needs on a machine with no GPU):
- WORLD_SIZE and RANK: the job's world size (nodes x GPUs per node) and rank 0, as torchrun
  sets them for every worker;
- `get_device_arch_version` as arguments.py imported it: the target GPU's compute capability
  major (9 for Hopper, 10 for Blackwell), which is what it returns on the job's GPUs.
Nothing else: parse_args() reads the exact argv the job passes to pretrain_gpt.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

TREE = Path(__file__).resolve().parents[2].parent / "shared" / "frameworks" / "megatron-lm-core_v0.16.1"


def tree() -> Path:
    return Path(os.environ.get("GPUCLUSTER_MEGATRON_LM", str(TREE)))


def _load():
    sys.path.insert(0, str(tree()))
    warnings.simplefilter("ignore")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from megatron.training import arguments
    return arguments


def _one(arguments, case: dict) -> dict:
    keep_env, keep_argv = dict(os.environ), sys.argv
    try:
        for name in ("CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FWD_LAYERNORM_SM_MARGIN"):
            os.environ.pop(name, None)
        os.environ.update({k: str(v) for k, v in case.get("env", {}).items()})
        arch = int(case.get("arch", 9))
        arguments.get_device_arch_version = lambda: arch
        sys.argv = ["pretrain_gpt.py", *case["argv"]]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                args = arguments.parse_args()
            except SystemExit:
                return {"ok": False, "error": "parse_args: " + err.getvalue().strip().splitlines()[-1]}
            arguments.validate_args(args)
        return {"ok": True}
    except Exception as exc:   # the validator's assertions and ValueErrors are its verdict
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return {"ok": False, "error": f"{type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})"}
    finally:
        os.environ.clear()
        os.environ.update(keep_env)
        sys.argv = keep_argv


def main() -> None:
    cases = json.load(sys.stdin)
    arguments = _load()
    print(json.dumps([_one(arguments, c) for c in cases]))


if __name__ == "__main__":
    main()
