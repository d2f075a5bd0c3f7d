"""Slurm partitions in the replay twin: node sets (hostlists over the cluster's node names),
PriorityTier, and their errors; hypothesis checks that no job ever starts outside its partition."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from helpers import check_now, pool, scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import UserError
from gpucluster.sim.jobs import PENDING
from gpucluster.sim.node_sets import partition_of
from gpucluster.sim.run import build
from gpucluster.specs.hostlist import compress, expand

HEADER = "JobID|Partition|Submit|Start|End|Timelimit|State|ExitCode|AllocTRES"


def at(minutes: float) -> str:
    return (datetime(2024, 5, 1) + timedelta(minutes=minutes)).isoformat()


def history(tmp_path: Path, rows: list[tuple]) -> str:
    """rows: (id, partition, submit min, run min, gpus); recorded waits 0 (not compared here)."""
    lines = [HEADER] + [f"{i}|{p}|{at(s)}|{at(s)}|{at(s + r)}|UNLIMITED|COMPLETED|0:0|gres/gpu={g}"
                        for i, p, s, r, g in rows]
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def replay(path: str, queues: dict | None = None, policy: str = "backfill", nodes: int = 2, **kw):
    sc = scenario([{"kind": "trace", "name": "h", "format": "sacct", "path": path}],
                  pools=[pool("a", "H100", nodes)], hostnames={"a": f"gpu[01-{nodes:02d}]"},
                  queues=queues or {}, policy=policy, **kw)
    sim = build(sc)
    sim.run()
    return sim, {j.name if hasattr(j, "name") else j.id: j for j in sim.by_id.values()}


# -- hostlists ------------------------------------------------------------------------
@pytest.mark.parametrize("expr, names", [
    ("gpu01", ["gpu01"]),
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    ("gpu[01-02,09],login1", ["gpu01", "gpu02", "gpu09", "login1"]),
    ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
    ("a-[0000-0001]", ["a-0000", "a-0001"]),
    ("gpu[01-02],gpu01", ["gpu01", "gpu02"]),      # a repeat is dropped, as Slurm does
])
def test_hostlists_expand_as_slurm_does(expr, names):
    assert expand(expr) == names


@pytest.mark.parametrize("expr", ["", "gpu[01-", "gpu]01", "gpu[03-01]", "gpu[a-b]", "gpu[[1]]", "gpu[1-2],,x",
                                  "gp u01", "gpu[1-2000000]"])
def test_bad_hostlists_raise_with_the_reason(expr):
    with pytest.raises(ValueError):
        expand(expr)


@given(st.lists(st.tuples(st.sampled_from(["gpu", "n", "rack1-n"]), st.integers(0, 120), st.sampled_from([1, 2, 4])),
                min_size=1, max_size=40))
def test_compress_round_trips(items):
    names = list(dict.fromkeys(f"{p}{str(n).zfill(w)}" for p, n, w in items))
    got = expand(compress(names))
    assert sorted(got) == sorted(names)


def test_compress_writes_ranges():
    assert compress([f"gpu{i:02d}" for i in (1, 2, 3, 4, 9)] + ["login1"]) == "gpu[01-04,09],login1"


# -- confinement and tiers on hand-made cases -----------------------------------------
def test_a_job_waits_for_its_partitions_node_while_another_is_free(tmp_path):
    path = history(tmp_path, [(1, "debug", 0, 60, 8), (2, "debug", 1, 60, 8)])
    queues = {"debug": {"nodes": "gpu01"}, "batch": {"nodes": "gpu[01-02]"}}
    sim, _ = replay(path, queues)
    assert order(sim) == [(0, "debug"), (3600, "debug")]     # gpu02 stays free: not debug's
    free, _ = replay(path)                                   # the twin without node sets
    assert order(free) == [(0, "debug"), (60, "debug")]


@pytest.mark.parametrize("policy", ["backfill", "multifactor"])
def test_a_higher_priority_tier_goes_first(tmp_path, policy):
    # a 16-GPU job holds both nodes for an hour; behind it a 16-GPU batch job, then an 8-GPU debug job
    path = history(tmp_path, [(1, "batch", 0, 60, 16), (2, "batch", 1, 60, 16), (3, "debug", 2, 30, 8)])
    tiered = {"debug": {"nodes": "gpu01", "priority_tier": 2}, "batch": {"nodes": "gpu[01-02]", "priority_tier": 1}}
    sim, _ = replay(path, tiered, policy)
    assert order(sim) == [(0, "batch"), (3600, "debug"), (5400, "batch")]    # debug first, then the batch job
    flat = {"debug": {"nodes": "gpu01"}, "batch": {"nodes": "gpu[01-02]"}}   # one tier: submission order
    sim2, _ = replay(path, flat, policy)
    assert order(sim2) == [(0, "batch"), (3600, "batch"), (7200, "debug")]


def order(sim) -> list[tuple[float, str]]:
    return sorted((round(j.first_start), j.partition) for j in sim.by_id.values())


def test_tier_orders_multifactor_before_priority(tmp_path):
    path = history(tmp_path, [(1, "batch", 0, 60, 16), (2, "batch", 1, 60, 16), (3, "debug", 2, 30, 16)])
    queues = {"debug": {"priority_tier": 1}, "batch": {"priority_tier": 2}}
    opts = {"PriorityWeightPartition": 1000, "partition_priority": {"debug": 100, "batch": 1}}
    sim, _ = replay(path, queues, "multifactor", policy_options=opts)
    assert [p for _, p in order(sim)] == ["batch", "batch", "debug"]    # the tier wins over PriorityJobFactor
    sim2, _ = replay(path, {}, "multifactor", policy_options=opts)
    assert [p for _, p in order(sim2)] == ["batch", "debug", "batch"]


def test_each_disjoint_partition_protects_its_first_blocked_job(tmp_path):
    # debug is gpu01, batch gpu02, each full or half full for an hour; each has a blocked 8-GPU job;
    # a long 4-GPU batch job fits now on gpu02 but would delay batch's blocked job: it must wait
    path = history(tmp_path, [(1, "debug", 0, 60, 8), (2, "batch", 0, 60, 4), (3, "debug", 1, 60, 8),
                              (4, "batch", 2, 60, 8), (5, "batch", 3, 120, 4)])
    sim, _ = replay(path, {"debug": {"nodes": "gpu01"}, "batch": {"nodes": "gpu02"}})
    got = {j.seq: round(j.first_start) for j in sim.by_id.values()}
    assert sorted(got.values()) == [0, 0, 3600, 3600, 7200]
    assert max(got.items(), key=lambda kv: kv[1])[0] == max(got)      # the long 4-GPU job starts last


def test_strict_priority_blocks_only_overlapping_partitions(tmp_path):
    # gpu01 is debug's, gpu02 batch's: a debug job that cannot start does not block batch
    path = history(tmp_path, [(1, "debug", 0, 60, 8), (2, "debug", 1, 60, 8), (3, "batch", 2, 60, 8)])
    queues = {"debug": {"nodes": "gpu01"}, "batch": {"nodes": "gpu02"}}
    sim, _ = replay(path, queues, "multifactor", policy_options={"backfill": False})
    assert order(sim) == [(0, "debug"), (120, "batch"), (3600, "debug")]


# -- errors and warnings ---------------------------------------------------------------
def test_a_job_larger_than_its_partition_is_a_warning_and_rejected(tmp_path):
    path = history(tmp_path, [(1, "debug", 0, 60, 16), (2, "batch", 0, 60, 16)])
    sc = scenario([{"kind": "trace", "name": "h", "format": "sacct", "path": path}], pools=[pool("a", "H100", 2)],
                  hostnames={"a": "gpu[01-02]"}, queues={"debug": {"nodes": "gpu01"}})
    sim = build(sc)
    assert [w["code"] for w in sim.warnings] == ["larger_than_partition"]
    assert "partition 'debug'" in sim.warnings[0]["message"] and sim.warnings[0]["jobs"] == 1
    sim.run()
    bad = next(j for j in sim.by_id.values() if j.partition == "debug")
    assert bad.first_start is None and bad.state != PENDING and "more than its partition 'debug'" in bad.reason


@pytest.mark.parametrize("queues, hostnames, field, words", [
    ({"debug": {"nodes": "gpu[01-03]"}}, {"a": "gpu[01-02]"}, "queues.debug.nodes", "gpu03"),
    ({"debug": {"nodes": "gpu01"}}, {}, "queues.debug.nodes", "a-[0000-0001]"),
    ({}, {"a": "gpu[01-03]"}, "hostnames.a", "names 3 nodes"),
    ({}, {"b": "gpu[01-02]"}, "hostnames.b", "no node pool"),
    ({}, {"a": "gpu[02-01]"}, "hostnames.a", "backwards"),
])
def test_bad_node_names_are_one_clear_error(tmp_path, queues, hostnames, field, words):
    path = history(tmp_path, [(1, "debug", 0, 60, 8)])
    sc = scenario([{"kind": "trace", "name": "h", "format": "sacct", "path": path}], pools=[pool("a", "H100", 2)],
                  hostnames=hostnames, queues=queues)
    with pytest.raises(UserError) as e:
        build(sc)
    assert e.value.field == field and words in str(e.value)


def test_a_bad_hostlist_in_a_partition_is_a_spec_error():
    with pytest.raises(UserError) as e:
        scenario([{"kind": "training", "name": "t", "gpus": 1, "duration_hours": 1,
                   "arrivals": {"process": "once", "count": 1}}], queues={"debug": {"nodes": "gpu[01-"}})
    assert "queues.debug.nodes" in str(e.value) and "without ']'" in str(e.value)


@pytest.mark.parametrize("policy", ["fifo", "las", "kueue"])
def test_policies_without_partitions_refuse_node_sets(tmp_path, policy):
    sc = scenario([{"kind": "training", "name": "t", "gpus": 1, "duration_hours": 1,
                    "arrivals": {"process": "once", "count": 1}}], policy=policy,
                  queues={"default": {"nodes": "a-0000", "gpus": 8}})
    with pytest.raises(UserError) as e:
        build(sc)
    assert e.value.field == "queues.default.nodes" and "does not model Slurm partitions" in str(e.value)


def test_generated_workloads_use_their_queue_as_partition():
    sc = scenario([{"kind": "training", "name": "t", "queue": "debug", "gpus": 8, "duration_hours": 1,
                    "arrivals": {"process": "once", "count": 3}}], pools=[pool("a", "H100", 4)],
                  queues={"debug": {"nodes": "a-[0001-0002]"}})
    sim = build(sc)
    nodes: set[int] = set()
    sim.hooks_start.append(lambda j: nodes.update(np.unique(sim.state.gpu_node[j.alloc]).tolist()))
    sim.run()
    assert nodes <= {1, 2} and sorted(j.first_start for j in sim.by_id.values())[2] == pytest.approx(3600)


# -- the invariant over random clusters, partitions and histories ----------------------------
@st.composite
def cases(draw):
    names = [f"gpu{i:02d}" for i in range(1, 7)]   # pools a (H100 x 4) and b (A100 x 2)
    parts = {}
    for p in ("debug", "batch", "long"):
        if draw(st.booleans()):
            chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True))
            parts[p] = {"nodes": compress(sorted(chosen))}
        if draw(st.booleans()):
            parts.setdefault(p, {})["priority_tier"] = draw(st.integers(0, 3))
    rows, t = [], 0.0
    for i in range(draw(st.integers(1, 25))):
        t += draw(st.integers(0, 60))
        rows.append((i, draw(st.sampled_from(["debug", "batch", "long", "other"])), t, draw(st.integers(1, 300)),
                     draw(st.sampled_from([1, 2, 4, 8, 16, 24]))))
    policy = draw(st.sampled_from(["backfill", "multifactor", "topo"]))
    opts: dict = {"estimate": draw(st.sampled_from(["limit", "runtime"]))}
    if policy == "multifactor":
        opts["backfill"] = draw(st.booleans())
        opts["PriorityWeightAge"] = draw(st.sampled_from([0, 1000]))
    kw = {"policy": policy, "policy_options": opts, "seed": draw(st.integers(0, 50))}
    if draw(st.booleans()):
        kw["failures"] = {"per_gpu_hour": draw(st.floats(1e-4, 5e-3)), "repair_hours": 1.0}
    return parts, rows, kw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_no_job_ever_starts_outside_its_partition(case):
    parts, rows, kw = case
    with tempfile.TemporaryDirectory() as d:
        path = history(Path(d), rows)
        sc = scenario([{"kind": "trace", "name": "h", "format": "sacct", "path": path}],
                      pools=[pool("a", "H100", 4), pool("b", "A100", 2)],
                      hostnames={"a": "gpu[01-04]", "b": "gpu[05-06]"}, queues=parts, **kw)
        sim = build(sc)
    index = {n.name: i for i, n in enumerate(sim.state.nodes)}
    allowed = {p: {index[n] for n in expand(q["nodes"])} for p, q in parts.items() if "nodes" in q}
    starts_seen = [0]

    def on_start(job):
        nodes = set(np.unique(sim.state.gpu_node[job.alloc]).tolist())
        own = allowed.get(partition_of(job))
        assert own is None or nodes <= own, f"job {job.id} of {partition_of(job)} on {nodes}, outside {own}"
        check_now(sim)
        starts_seen[0] += 1
    sim.hooks_start.append(on_start)
    sim.run()
    stt = sim.state
    for j in sim.by_id.values():   # a job that fits its partition's nodes of one GPU type is never rejected for size
        own = allowed.get(partition_of(j))
        room = max((sum(int(stt.node_gpus[n]) for n in own if stt.node_type[n] == t) for t in range(len(stt.types))),
                   default=0) if own is not None else 0
        if own is not None and j.gpus <= room:
            assert "more than its partition" not in j.reason
    assert starts_seen[0] == sum(1 for j in sim.by_id.values() if j.first_start is not None) or sim.failures
