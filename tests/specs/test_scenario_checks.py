"""Bad scenarios stop early: one line naming the field (exit 2), or a named warning in the summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from tests_cli_helpers import ROOT, assert_one_line_error, run

CLUSTER = ROOT / "examples" / "h100-64-ib.yaml"     # 8 nodes x 8 H100 = 64 GPUs


def write(tmp_path: Path, body: str, cluster: str | None = None) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: t\ncluster: {cluster or CLUSTER}\n" + body)
    return str(p)


TRAIN = """
workloads:
  - kind: training
    name: train
    queue: a
    arrivals: {per_day: 24, count: 10}
    gpus: [8, 16]
    duration_hours: 2
"""


def test_partitions_over_committing_the_cluster_are_an_error(tmp_path):
    body = "policy: partition\nqueues:\n  a: {gpus: 32}\n  b: {gpus: 24}\n  c: {gpus: 16}\n" + TRAIN
    proc = run("simulate", write(tmp_path, body))
    assert_one_line_error(proc, "s.yaml:7", "queues.c.gpus", "over-commit", "asks for 16 GPUs", "only 8 of its 64")
    # the same scenario under a policy without partitions is fine (quotas are not capacity)
    run("simulate", write(tmp_path, body), "--policy", "fifo", check_rc=0)


def test_a_partition_with_no_nodes_is_an_error(tmp_path):
    body = "policy: partition\nqueues:\n  a: {gpus: 32}\n  b: {gpus: 0}\n" + TRAIN
    assert_one_line_error(run("simulate", write(tmp_path, body)), "queues.b.gpus", "0 GPUs", "no nodes")


def test_jobs_sent_to_an_empty_default_partition_are_an_error(tmp_path):
    body = "policy: partition\nqueues:\n  a: {gpus: 64}\n" + TRAIN.replace("queue: a", "queue: other")
    assert_one_line_error(run("simulate", write(tmp_path, body)), "workloads[0].queue",
                          "'other' has no partition", "take all 64 GPUs")


def test_jobs_no_node_can_hold_are_a_named_warning_in_the_summary(tmp_path):
    body = TRAIN.replace("gpus: [8, 16]", "gpus: [8, 128]")
    path = write(tmp_path, body)
    data = json.loads(run("simulate", path, "--json", check_rc=0).stdout)
    (w,) = data["warnings"]
    assert w["code"] == "larger_than_cluster" and w["field"] == "workloads[0].gpus" and w["workload"] == "train"
    assert w["jobs"] == data["jobs"]["cancelled"] > 0
    from gpucluster.documents.simulation import SimulationDocument
    assert SimulationDocument.model_validate(data).warnings[0].code == "larger_than_cluster"
    out = run("simulate", path, check_rc=0).stdout
    assert "Warning (larger_than_cluster, workloads[0].gpus): train:" in out
    assert "can never run here (asks for 128 GPUs, more than the cluster has" in out


def test_jobs_larger_than_their_partition_are_a_named_warning(tmp_path):
    body = "policy: partition\nqueues:\n  a: {gpus: 8}\n  b: {gpus: 8}\n" + TRAIN
    data = json.loads(run("simulate", write(tmp_path, body), "--json", check_rc=0).stdout)
    assert [w["code"] for w in data["warnings"]] == ["larger_than_partition"]
    assert "partition 'a'" in data["warnings"][0]["message"]


def test_an_inference_service_whose_replicas_never_fit_is_named(tmp_path):
    body = """horizon_days: 1
workloads:
  - kind: inference
    name: chat
    gpus_per_replica: 128
    max_replicas: 2
    replica_rps: 10
    rate: {kind: constant, mean_rps: 5}
"""
    data = json.loads(run("simulate", write(tmp_path, body), "--json", check_rc=0).stdout)
    (w,) = data["warnings"]
    assert w["field"] == "workloads[0].gpus_per_replica" and "every replica" in w["message"]


def inline(tmp_path: Path, switch: str | None = None, **change) -> str:
    c = yaml.safe_load(CLUSTER.read_text())
    c.pop("facility", None)
    if switch:
        c["fabric"]["switch"] = switch
    pool = c["node_pools"][0]
    pool.update(change)
    return write(tmp_path, TRAIN, cluster=json.dumps(c))


def test_an_inline_cluster_error_names_the_real_field(tmp_path):
    proc = run("simulate", inline(tmp_path, gpu="H900"))
    assert_one_line_error(proc, "cluster.node_pools[0].gpu", "unknown GPU 'H900'", "valid:", "H100-SXM5-80GB")
    assert "cluster.str" not in proc.stderr and "valid string" not in proc.stderr


def test_an_inline_fat_tree_too_large_names_the_fabric(tmp_path):
    # 10,000 nodes x 8 NICs on 64-port switches: more than the 65,536 endpoints 3 levels hold
    proc = run("simulate", inline(tmp_path, switch="QM9700", count=10000))
    assert_one_line_error(proc, "cluster.fabric", "65536 endpoints")
