"""Trace readers: every format, bad rows skipped and counted with their first line."""

from __future__ import annotations

import pytest
from helpers import DATA

from gpucluster.errors import UserError
from gpucluster.sim.traces import read
from gpucluster.sim.traces.openb import read_nodes
from gpucluster.sim.traces.sacct import parse_elapsed


def test_sacct_reads_jobs_and_counts_bad_rows():
    got = read("sacct", str(DATA / "sacct.txt"))
    assert got.rows == 10
    assert [j.name for j in got.jobs] == ["101", "102", "103", "108"]
    assert [j.gpus for j in got.jobs] == [16, 1, 2, 8]
    assert got.jobs[0].gpu_types == ("H100-SXM5-80GB",)        # gres/gpu:h100 -> the catalog name
    assert got.jobs[0].submit == 0 and got.jobs[0].duration == 6 * 3600
    assert got.jobs[2].duration == 90 * 60                      # End Unknown: Elapsed
    assert got.jobs[3].duration == 86400
    assert sum(got.bad.values()) == 3
    assert got.first_bad["unreadable time"] == 8
    assert got.first_bad["times out of order"] == 11
    assert got.skipped == {"job steps": 1, "without GPUs": 1, "cancelled before starting": 1}
    assert "3 bad rows skipped" in got.summary()


def test_sacct_elapsed_forms():
    assert parse_elapsed("1-02:03:04") == 86400 + 7384
    assert parse_elapsed("05:06") == 306
    with pytest.raises(ValueError):
        parse_elapsed("soon")


def test_sacct_without_gpu_fields_is_refused(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("JobID|Submit|Start|End\n1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00\n")
    with pytest.raises(UserError, match="AllocTRES"):
        read("sacct", str(p))


def test_openb_pods_shares_and_bad_rows():
    got = read("openb", str(DATA / "openb_pods.csv"))
    assert got.rows == 15 and len(got.jobs) == 11
    assert sum(got.bad.values()) == 3 and got.skipped["without GPUs"] == 1
    share = next(j for j in got.jobs if j.name == "pod-01")
    assert (share.gpus, share.milli, share.cpu_milli) == (1, 460, 6000)
    assert next(j for j in got.jobs if j.name == "pod-06").gpu_types == ("G2",)
    assert next(j for j in got.jobs if j.name == "pod-10").gpu_types == ("T4", "P100")
    assert got.first_bad["gpu_milli outside 1..1000"] == 9


def test_openb_nodes():
    nodes, got = read_nodes(str(DATA / "openb_nodes.csv"))
    assert [n.gpus for n in nodes] == [2, 2, 8, 8, 4]
    assert nodes[2].cpu_milli == 96000 and nodes[2].gpu_type == "G2"
    assert sum(got.bad.values()) == 1 and got.skipped["without GPUs"] == 1


def test_philly_runtimes():
    got = read("philly", str(DATA / "philly_runtime.csv"))
    assert [j.duration for j in got.jobs] == [120, 3600, 0, 86400, 600, 7200]
    assert sum(got.bad.values()) == 2


def test_gavel_trace_runtimes_by_rank():
    got = read("gavel", str(DATA / "sample.trace"))
    assert [j.gpus for j in got.jobs] == [1, 2, 4, 8]
    assert sum(got.bad.values()) == 2
    resnet = [j for j in got.jobs if j.job_type.startswith("ResNet")]
    assert resnet[0].duration <= resnet[1].duration    # more steps, longer run
    assert {j.submit for j in got.jobs} == {0, 60, 120, 240}


def test_unknown_format_lists_the_valid_ones():
    with pytest.raises(UserError, match="valid: gavel, openb, philly, sacct"):
        read("helios", str(DATA / "sacct.txt"))


def test_the_shared_openb_trace_reads_cleanly(shared_dir):
    got = read("openb", str(shared_dir / "traces" / "openb_pod_list_default.csv"))
    assert got.rows == 8152 and not got.bad
    assert got.skipped["without GPUs"] == 1088 and len(got.jobs) == 8152 - 1088
    nodes, _ = read_nodes(str(shared_dir / "traces" / "openb_node_list_gpu_node.csv"))
    assert len(nodes) == 1213 and sum(n.gpus for n in nodes) == 6212


def test_openb_inf_and_overlong_fields_are_bad_rows_or_one_line(tmp_path):
    from gpucluster.errors import UserError
    from gpucluster.sim.traces.openb import read_pods

    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
    p = tmp_path / "pods.csv"
    p.write_text(head + "p1,1000,100,1,1000,0,inf\np2,1000,100,1,1000,0,10\n")
    r = read_pods(str(p))
    assert r.rows == 2 and len(r.jobs) == 1
    p.write_text(head + "p1,1000,100,1,1000,0,10," + "x" * 200_000 + "\n")
    with pytest.raises(UserError, match="not a readable CSV"):
        read_pods(str(p))
