"""`gpucluster bench collective` under real torchrun: two torchrun agents (2 "nodes") with two
ranks each, c10d rendezvous on loopback, gloo; rank 0 writes the result."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests_cli_helpers import EXE

pytest.importorskip("torch")
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not TORCHRUN.exists() and shutil.which("torchrun") is None, reason="torchrun not installed")
def test_torchrun_two_by_two(tmp_path):
    exe = str(TORCHRUN) if TORCHRUN.exists() else "torchrun"
    port = _free_port()
    out = tmp_path / "r.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([exe, "--nnodes=2", "--nproc-per-node=2", f"--node-rank={n}", "--rdzv-backend=c10d",
                               f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=gpc", "--no-python", str(EXE),
                               "bench", "collective", "-b", "64K", "-e", "4M", "-f", "8", "--iters", "3", "--json",
                               "-o", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(2)]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, e) in zip(procs, outs, strict=True):
        assert p.returncode == 0, e[-3000:]
    res = json.loads(out.read_text())
    assert res["world_size"] == 4 and res["nodes"] == 2 and res["ranks_per_node"] == 2
    assert res["launcher"] == "torchrun" and res["wrong_total"] == 0
    assert [r["size_bytes"] for r in res["rows"]] == [64 << 10, 512 << 10, 4 << 20]
    assert sorted(res["node_ranks"]) == ["node0", "node1"]
    # the same-run host baseline diagnose compares against: run from inside torchrun, it must not
    # join the torchrun agent's store (it did, and waited out its timeout)
    base = res["baseline"]
    assert base["kind"] == "loopback" and not base.get("error") and len(base["rows"]) == 1
