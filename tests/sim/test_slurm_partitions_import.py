"""`scontrol show partition -o` read for the replay scenario: node sets, PriorityTier and
PriorityJobFactor kept; bad lines counted by reason with their first line; the pools' Slurm
names laid on the cluster spec, or one clear error."""

from __future__ import annotations

import pytest
from helpers import pool, scenario

from gpucluster.errors import UserError
from gpucluster.sim.run import build
from gpucluster.sim.traces.slurm_partitions import read_partitions, scenario_fields

# what Slurm 22.05 prints (abridged only in the middle: every field the reader reads is as printed)
SCONTROL = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=00:30:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=gpu[01-02] PriorityJobFactor=10 "
    "PriorityTier=2 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP "
    "TotalCPUs=16 TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=16,mem=31G,node=2,billing=16,gres/gpu=16\n"
    "PartitionName=batch AllowGroups=ALL Default=YES MaxTime=2-00:00:00 Nodes=gpu[01-08] PriorityJobFactor=1 "
    "PriorityTier=1 State=UP TotalNodes=8\n"
    "PartitionName=all Nodes=ALL PriorityJobFactor=1 PriorityTier=1 State=UP\n")


def test_the_fields_the_twin_needs_are_kept():
    got = read_partitions(SCONTROL)
    assert not got.bad and got.lines == 3
    d, b, a = got.partitions["debug"], got.partitions["batch"], got.partitions["all"]
    assert (d.nodes, d.priority_tier, d.priority_job_factor) == ("gpu[01-02]", 2, 10)
    assert (b.nodes, b.priority_tier, b.priority_job_factor) == ("gpu[01-08]", 1, 1)
    assert a.nodes is None                      # Nodes=ALL: every node


def test_bad_lines_are_counted_by_reason_with_their_first_line():
    text = ("PartitionName=ok Nodes=gpu[01-02] PriorityTier=1\n"
            "Nodes=gpu01 PriorityTier=1\n"                           # 2: no name
            "PartitionName=x Nodes=gpu[01- PriorityTier=1\n"        # 3: not a hostlist
            "PartitionName=y Nodes=gpu01 PriorityTier=high\n"        # 4
            "PartitionName=z Nodes=gpu01 PriorityTier=70000\n"       # 5: above Slurm's 65533
            "\n"
            "PartitionName=ok Nodes=gpu03\n"                        # 7: twice
            "PartitionName=w Nodes=gpu01 oops\n"                    # 8
            "PartitionName=empty Nodes=(null)\n"                    # 9: counted apart
            "PartitionName=v PriorityJobFactor=-1 Nodes=gpu01\n")   # 10
    got = read_partitions(text, "parts.txt")
    assert list(got.partitions) == ["ok"]
    assert dict(got.bad) == {"no PartitionName": 1, "Nodes is not a hostlist": 1, "unreadable PriorityTier": 2,
                             "a partition named twice": 1, "a word that is not KEY=VALUE": 1,
                             "unreadable PriorityJobFactor": 1}
    assert got.first_bad == {"no PartitionName": 2, "Nodes is not a hostlist": 3, "unreadable PriorityTier": 4,
                             "a partition named twice": 7, "a word that is not KEY=VALUE": 8,
                             "unreadable PriorityJobFactor": 10}
    assert got.skipped == {"partitions without nodes": 1}
    assert "7 bad lines skipped" in got.summary() and "(first at line 4)" in got.summary()
    assert got.report()["bad"]["unreadable PriorityTier"] == {"lines": 2, "first_line": 4}


def test_a_one_pool_cluster_gets_the_names_the_partitions_use():
    f = scenario_fields(read_partitions(SCONTROL), {"h200": 8}, {}, multifactor=True)
    assert f["hostnames"] == {"h200": "gpu[01-08]"}
    assert f["queues"] == {"debug": {"nodes": "gpu[01-02]", "priority_tier": 2},
                           "batch": {"nodes": "gpu[01-08]", "priority_tier": 1}, "all": {"priority_tier": 1}}
    assert f["partition_priority"] == {"debug": 10, "batch": 1, "all": 1}
    assert "partition_priority" not in scenario_fields(read_partitions(SCONTROL), {"h200": 8}, {}, False)


@pytest.mark.parametrize("pools, names, words", [
    ({"h100": 4, "h200": 4}, {}, "give each pool its Slurm node names"),
    ({"h200": 6}, {}, "give each pool"),                                     # 8 names, 6 nodes
    ({"h100": 4, "h200": 4}, {"h100": "gpu[01-04]", "h200": "gpu[05-07],x"}, "gpu08"),
    ({"h200": 8}, {"h100": "gpu[01-08]"}, "no node pool 'h100'"),
    ({"h200": 8}, {"h200": "gpu[01-07]"}, "names 7 nodes"),
])
def test_nodes_that_cannot_be_laid_on_the_pools_are_one_error(pools, names, words):
    with pytest.raises(UserError) as e:
        scenario_fields(read_partitions(SCONTROL), pools, names, False)
    assert e.value.field == "--hostnames" and words in str(e.value)


def test_the_fields_make_a_scenario_that_confines_jobs(tmp_path):
    f = scenario_fields(read_partitions(SCONTROL), {"h100": 4, "h200": 4},
                        {"h100": "gpu[01-04]", "h200": "gpu[05-08]"}, True)
    sc = scenario([{"kind": "training", "name": "t", "queue": "debug", "gpus": 8, "duration_hours": 1,
                    "arrivals": {"process": "once", "count": 4}}],
                  pools=[pool("h100", "H100", 4), pool("h200", "H200", 4)], hostnames=f["hostnames"],
                  queues=f["queues"], policy="multifactor",
                  policy_options={"partition_priority": f["partition_priority"]})
    sim = build(sc)
    sim.run()
    assert sorted(round(j.first_start) for j in sim.by_id.values()) == [0, 0, 3600, 3600]   # 2 debug nodes
