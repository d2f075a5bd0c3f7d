"""bench collective with gloo and the local launcher: every op checked, nccl-tests table and
JSON, #wrong > 0 exits 1; missing torch names the extra; diagnose on synthetic results."""

import json
import sys

import pytest

from tests_cli_helpers import assert_one_line_error, run

torch = pytest.importorskip("torch")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


@pytest.mark.parametrize("op", OPS)
def test_every_op_is_correct(op):
    proc = run("bench", "collective", "--local", "3", "--oversubscribe", "--op", op, "-b", "1K", "-e", "64K", "-f", "64",
               "--iters", "2", "--warmup", "1", "--json", check_rc=0)
    res = json.loads(proc.stdout)
    assert res["schema"] == "gpucluster-bench-collective/v1" and res["world_size"] == 3 and res["nodes"] == 1
    assert res["wrong_total"] == 0 and len(res["rows"]) == 2
    for r in res["rows"]:
        assert r["time_us"] > 0 and r["busbw_gbps"] >= 0
        if op in ("all_gather", "reduce_scatter", "all_to_all"):
            assert r["size_bytes"] % (3 * 4) == 0


def test_table_and_files(tmp_path):
    out, prom = tmp_path / "r.json", tmp_path / "m.prom"
    proc = run("bench", "collective", "--local", "2", "--oversubscribe", "-b", "8", "-e", "1M", "-f", "16", "--iters", "3",
               "-o", str(out), "--metrics", str(prom), check_rc=0)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# gpucluster bench collective: measured all_reduce_perf (gloo, local)")
    assert any("#wrong" in ln for ln in lines) and "# Out of bounds values : 0 OK" in lines
    data = [ln.split() for ln in lines if not ln.startswith("#")]
    assert [int(d[0]) for d in data] == [8, 128, 2048, 32768, 524288]
    assert all(d[2] == "float" and d[3] == "sum" for d in data)
    res = json.loads(out.read_text())
    assert res["rows"][-1]["size_bytes"] == 524288
    text = prom.read_text()
    assert 'gpucluster_collective_busbw_bytes_per_second{op="all_reduce",backend="gloo",ranks="2",nodes="1",' \
           'size_bytes="524288",placement="in-place"}' in text
    assert 'placement="out-of-place"' not in text       # torch's all_reduce has no out-of-place form
    assert oct(prom.stat().st_mode & 0o777) == "0o644"


def _halves(line: str) -> tuple[list[str], list[str]]:
    """(out-of-place, in-place) columns of a table row: time, algbw, busbw, #wrong each."""
    cols = line.split()
    return cols[5:9], cols[9:13]


def test_in_place_columns_are_measured_not_copied():
    """all_gather is measured both ways (in-place: the send buffer is this rank's slice of the
    receive buffer), all_reduce only in place, all_to_all only out of place: a half that was not
    measured prints `-`, never the other half's figures."""
    res = json.loads(run("bench", "collective", "--local", "2", "--oversubscribe", "--op", "all_gather", "-b", "64K", "-e", "64K",
                         "--iters", "2", "--json", check_rc=0).stdout)
    [row] = res["rows"]
    assert row["placement"] == "out-of-place" and row["in_place"]["wrong"] == 0
    assert row["in_place"]["time_us"] != row["time_us"]       # two measurements, not one printed twice
    for op, oop_measured, ip_measured in (("all_gather", True, True), ("all_reduce", False, True),
                                          ("all_to_all", True, False)):
        out = run("bench", "collective", "--local", "2", "--oversubscribe", "--op", op, "-b", "64K", "-e", "64K", "--iters", "2",
                  check_rc=0).stdout
        [line] = [ln for ln in out.splitlines() if not ln.startswith("#")]
        oop, ip = _halves(line)
        assert (oop != ["-"] * 4) == oop_measured and (ip != ["-"] * 4) == ip_measured, (op, line)
        assert oop != ip, line


def test_wrong_result_exits_1(monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_BENCH_CORRUPT_RANK", "1")
    proc = run("bench", "collective", "--local", "2", "--oversubscribe", "-b", "1K", "-e", "1K", "--iters", "1")
    assert proc.returncode == 1
    assert "wrong values" in proc.stderr and "FAILED" in proc.stdout


def test_bad_input():
    assert_one_line_error(run("bench", "collective", "--op", "gossip", "--local", "2"), "--op", "all_reduce")
    assert_one_line_error(run("bench", "collective", "--backend", "nccl", "--local", "2", "--oversubscribe"), "NCCL needs GPUs")
    assert_one_line_error(run("bench", "collective"), "--local N", "torchrun")


def test_missing_torch_names_the_extra(monkeypatch):
    from gpucluster.bench.deps import require_ray, require_torch
    from gpucluster.errors import UserError
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UserError, match=r"gpucluster\[torch\]"):
        require_torch()
    with pytest.raises(UserError, match=r"gpucluster\[ray\]"):
        require_ray()


def test_rank_env_from_srun_and_torchrun():
    from gpucluster.bench.rankenv import detect
    t = detect({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "1", "MASTER_ADDR": "h0",
                "MASTER_PORT": "1234"})
    assert t is not None
    assert (t.rank, t.world_size, t.local_rank, t.node, t.master_addr, t.master_port) == (3, 8, 1, "node1", "h0", 1234)
    s = detect({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_NODEID": "0",
                "SLURMD_NODENAME": "gpu01", "MASTER_ADDR": "gpu01", "SLURM_JOB_ID": "7"})
    assert s is not None
    assert (s.rank, s.world_size, s.local_rank, s.node, s.launcher) == (5, 16, 5, "gpu01", "srun")
    assert detect({}) is None


def test_a_corrupt_rank_hook_that_is_not_a_number_is_one_line(monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_BENCH_CORRUPT_RANK", "one")
    assert_one_line_error(run("bench", "collective", "--local", "2", "--oversubscribe", "-b", "1K", "-e", "1K"),
                          "GPUCLUSTER_BENCH_CORRUPT_RANK", "rank number")
