"""A collective across two network namespaces, one with its link capped by tbf: the benchmark
measures the cap (within 15%) and `gpucluster diagnose` names the scale-out link as the
bottleneck; on the uncapped network it does not."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netns_helpers import two_nodes, why_not
from tests_cli_helpers import EXE, run

pytest.importorskip("torch")
_why = why_not()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")
SPEC = str(Path(__file__).parent / "data" / "netns-2node.yaml")
CAP_GBIT = 1.0


def _bench(net, tmp_path, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    port = "29731"
    procs = []
    for rank, (ns, ifname) in enumerate(((net.a, net.if_a), (net.b, net.if_b))):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "GROUP_RANK": str(rank),
               "MASTER_ADDR": net.addr_a, "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": ifname,
               "OMP_NUM_THREADS": "1"}
        argv = [str(EXE), "bench", "collective", "-b", "4M", "-e", "64M", "-f", "4", "--iters", "4",
                "--warmup", "1", "--timeout", "120", "--json", "-o", str(out)]
        procs.append(subprocess.Popen(net.cmd(ns, argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    try:
        outs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (o, e) in zip(procs, outs):
        assert p.returncode == 0, e[-2000:]
    return json.loads(out.read_text())


def _diagnose(result_path) -> tuple[int, dict]:
    proc = run("diagnose", "--cluster", SPEC, str(result_path), "--json")
    return proc.returncode, json.loads(proc.stdout)


def test_capped_link_is_measured_and_named(tmp_path):
    with two_nodes(cap=f"{CAP_GBIT:g}gbit") as net:
        result = _bench(net, tmp_path, "capped")
    assert result["nodes"] == 2 and result["wrong_total"] == 0
    busbw = result["rows"][-1]["busbw_gbps"]
    cap_gbps = CAP_GBIT / 8
    print(f"capped at {CAP_GBIT:g} Gbit/s ({cap_gbps:.3f} GB/s): busbw {busbw:.4f} GB/s", file=sys.stderr)
    assert abs(busbw - cap_gbps) / cap_gbps < 0.15, busbw
    code, report = _diagnose(tmp_path / "capped.json")
    assert code == 1
    neck = report["bottleneck"]
    assert neck["tier"] == "scale-out" and "Ethernet-10G" in neck["link"]
    assert "node0" in neck["link"] and "node1" in neck["link"]
    assert "across nodes" in neck["text"] and "scale-out network" in neck["text"]


def test_uncapped_run_has_no_bottleneck(tmp_path):
    with two_nodes() as net:
        result = _bench(net, tmp_path, "free")
    print(f"uncapped: busbw {result['rows'][-1]['busbw_gbps']:.3f} GB/s", file=sys.stderr)
    code, report = _diagnose(tmp_path / "free.json")
    assert code == 0, report
    assert report["bottleneck"] is None
