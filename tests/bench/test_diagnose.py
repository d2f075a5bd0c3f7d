"""diagnose on synthetic results: a scale-out shortfall is named with its numbers; a healthy
run is not; a one-node run is judged against the scale-up tier."""

import json

from tests_cli_helpers import ROOT, assert_one_line_error, run

SPEC = "examples/h100-64-ib.yaml"


SIZES = [1 << 20, 1 << 24, 1 << 28, 1 << 30]


def _result(nodes: int, per_node: int, busbw, op: str = "all_reduce") -> dict:
    """busbw: one figure for every size, or a list of them (one per size)."""
    bws = busbw if isinstance(busbw, list) else [busbw] * len(SIZES)
    return {"schema": "gpucluster-bench-collective/v1", "op": op, "backend": "nccl", "world_size": nodes * per_node,
            "nodes": nodes, "ranks_per_node": per_node, "wrong_total": 0,
            "node_ranks": {f"gpu{i:02d}": list(range(i * per_node, (i + 1) * per_node)) for i in range(nodes)},
            "rows": [{"size_bytes": s, "busbw_gbps": b, "algbw_gbps": b / 2, "time_us": 1.0, "wrong": 0}
                     for s, b in zip(SIZES, bws)]}


def _expected_busbw(nodes: int, per_node: int, scale: float) -> list[float]:
    """What the spec gives at every size (the smallest, below the bandwidth regime, as the next), x scale."""
    from gpucluster.bench.diagnose import diagnose_result
    from gpucluster.specs.cluster import load_cluster
    f = diagnose_result(load_cluster(str(ROOT / SPEC)), _result(nodes, per_node, 1.0), "x")
    exp = f.expected_gbps
    return [x * scale for x in [exp[0], *exp]]


def test_scale_out_shortfall_named(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_result(2, 8, _expected_busbw(2, 8, 0.27))))
    proc = run("diagnose", "--cluster", SPEC, str(p))
    assert proc.returncode == 1
    assert "BOTTLENECK" in proc.stdout and "across nodes busbw" in proc.stdout and "delivers 27%" in proc.stdout
    assert "NCCL_SOCKET_IFNAME" in proc.stdout and "HDR200" in proc.stdout
    rep = json.loads(run("diagnose", "--cluster", SPEC, str(p), "--json").stdout)
    assert rep["bottleneck"]["tier"] == "scale-out" and abs(rep["bottleneck"]["ratio"] - 0.27) < 0.01


def test_healthy_runs_pass(tmp_path):
    paths = []
    for name, (nodes, per) in {"one.json": (1, 8), "two.json": (2, 8)}.items():
        p = tmp_path / name
        p.write_text(json.dumps(_result(nodes, per, _expected_busbw(nodes, per, 0.95))))
        paths.append(str(p))
    proc = run("diagnose", "--cluster", SPEC, *paths, "--json", check_rc=0)
    rep = json.loads(proc.stdout)
    assert [t["tier"] for t in rep["tiers"]] == ["scale-up", "scale-out"] and rep["bottleneck"] is None


def test_bad_input(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"schema": "x"}')
    assert_one_line_error(run("diagnose", "--cluster", SPEC, str(p)), "bench collective")
    p.write_text(json.dumps(_result(9, 8, 1.0)))
    assert_one_line_error(run("diagnose", "--cluster", SPEC, str(p)), "9 nodes")
