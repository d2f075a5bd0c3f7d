"""Hypothesis over random scenarios: the simulator's conservation laws and its determinism."""

from __future__ import annotations

import math

from helpers import check_now, pending_or_running_are_reported, pool, scenario, watch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpucluster.errors import UserError
from gpucluster.sim.jobs import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING
from gpucluster.sim.metrics import gpu_time
from gpucluster.sim.run import build, simulate

POLICIES = ["fifo", "backfill", "sjf", "las", "kueue", "hetero", "topo", "binpack", "fgd", "partition", "multifactor"]


@st.composite
def scenarios(draw):
    pools = [pool("a", "H100", draw(st.integers(1, 4)), draw(st.sampled_from([4, 8])))]
    if draw(st.booleans()):
        pools.append(pool("b", "A100-SXM4-80GB", draw(st.integers(1, 3)), 8))
    workloads = []
    if draw(st.booleans()) or True:
        workloads.append({"kind": "training", "name": "train", "queue": "q1",
                          "arrivals": {"per_day": draw(st.floats(2, 60)), "count": draw(st.integers(1, 25))},
                          "gpus": draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 24, 64]), min_size=1, max_size=4)),
                          "duration_hours": {"dist": "exponential", "mean": draw(st.floats(0.2, 10))},
                          "checkpoint_minutes": draw(st.sampled_from([None, 20, 60])),   # None: no checkpoints
                          "checkpoint_write_s": draw(st.sampled_from([0, 30])),
                          "restart_s": draw(st.sampled_from([0, 120])), "priority": draw(st.integers(0, 2))})
    if draw(st.booleans()):
        workloads.append({"kind": "batch", "name": "md", "queue": "q2",
                          "arrivals": {"per_day": 4, "count": draw(st.integers(1, 3))},
                          "tasks": draw(st.integers(1, 20)), "task_hours": {"dist": "uniform", "low": 0.1, "high": 3}})
    if draw(st.booleans()):
        workloads.append({"kind": "inference", "name": "chat", "max_replicas": 4, "min_replicas": 1,
                          "replica_rps": 10, "rate": {"kind": "diurnal", "mean_rps": 20}, "end_hours": 30,
                          "autoscale_s": 600})
    kw = {"seed": draw(st.integers(0, 10_000)), "policy": draw(st.sampled_from(POLICIES)),
          "queues": {"q1": {"gpus": 8}, "q2": {"gpus": 8}, "default": {"gpus": 8}}}
    if kw["policy"] == "partition":  # one node each: partitions over-committing the cluster are an error
        assume(sum(p["count"] for p in pools) >= 3)
        kw["queues"] = {q: {"gpus": 1} for q in kw["queues"]}
    if draw(st.booleans()):  # the openb sample: GPU-sharing pods with CPU and memory on 5 nodes of 3 types
        kw["nodes_csv"] = "openb_nodes.csv"
        workloads = [w for w in workloads if w["kind"] != "training" or draw(st.booleans())]
        workloads.append({"kind": "trace", "name": "pods", "format": "openb", "path": "openb_pods.csv",
                          "time_scale": draw(st.sampled_from([0.1, 1.0, 5.0]))})
    if draw(st.booleans()):
        kw["failures"] = {"per_gpu_hour": draw(st.floats(1e-4, 5e-3)), "repair_hours": draw(st.floats(0.1, 5))}
    if draw(st.booleans()):
        kw["horizon_days"] = draw(st.floats(0.5, 5))
    elif any(w["kind"] == "inference" for w in workloads):
        kw["horizon_days"] = 3
    return scenario(workloads, pools=pools, **kw)


def run_watched(loaded):
    try:
        sim = build(loaded)
    except UserError as exc:  # a horizon that ends before the first arrival: a valid refusal
        assume("no jobs" not in exc.reason)
        raise
    checks = watch(sim)
    sim.run()
    check_now(sim)
    return sim, checks[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_at_every_event(loaded):
    sim, checks = run_watched(loaded)
    assert checks > 0 or not any(j.first_start is not None for j in sim.by_id.values())
    st_ = sim.state
    # GPU-hours are conserved: allocated + idle + down = capacity x time
    total = st_.alloc_gpu_s + st_.idle_gpu_s + st_.down_gpu_s
    assert math.isclose(total, st_.capacity_gpu_s, rel_tol=1e-9, abs_tol=1e-6)
    # ... and the jobs' own accounts add up to the allocated GPU-time
    gt = gpu_time(list(sim.by_id.values()))
    used = sum(v for k, v in gt.items() if k not in ("busy", "work"))   # every use, restarts of both kinds
    assert math.isclose(used, st_.alloc_gpu_s, rel_tol=1e-6, abs_tol=1e-3)
    # every job ended (completed, failed, cancelled) or is reported still running or pending
    for job in sim.by_id.values():
        assert job.state in (COMPLETED, FAILED, CANCELLED, RUNNING, PENDING)
        if job.state in (COMPLETED, FAILED, CANCELLED):
            assert job.end is not None
        if job.state == CANCELLED:
            assert job.reason
    pending_or_running_are_reported(sim)
    if loaded.spec.horizon_days is None:
        assert not sim.partial
        for j in sim.by_id.values():  # ended, or reported as never able to start
            assert j.state in (COMPLETED, FAILED, CANCELLED) or (j.state == PENDING and j.reason), (j, j.reason)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_seed_same_results(loaded):
    try:
        a = simulate(loaded).summary
    except UserError as exc:
        assume("no jobs" not in exc.reason)
        raise
    b = simulate(loaded).summary
    for s in (a, b):
        for k in ("wall_s", "events_per_s"):
            s.pop(k)
    assert a == b
