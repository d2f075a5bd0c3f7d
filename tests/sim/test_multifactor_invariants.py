"""Hypothesis over random Slurm histories (partitions, QOS, accounts, time limits, timeouts, failed
jobs, node failures) replayed under multifactor and backfill with either estimate: the simulator's
invariants hold at every event, GPU time is conserved, and every job ends or is reported."""

from __future__ import annotations

import math
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from helpers import check_now, pending_or_running_are_reported, pool, scenario, watch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.sim.jobs import CANCELLED, COMPLETED, FAILED, PENDING
from gpucluster.sim.metrics import gpu_time
from gpucluster.sim.run import build

HEADER = "JobID|Account|Partition|QOS|Submit|Start|End|Timelimit|State|ExitCode|AllocTRES"
STATES = ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED by 0", "NODE_FAIL"]


@st.composite
def histories(draw):
    n = draw(st.integers(1, 30))
    rows, t = [HEADER], datetime(2024, 1, 1)
    for i in range(n):
        t += timedelta(minutes=draw(st.integers(0, 90)))
        wait = timedelta(minutes=draw(st.integers(0, 120)))
        run_min = draw(st.integers(1, 600))
        limit_min = draw(st.sampled_from([None, 30, 60, 240, 1440]))
        limit = "UNLIMITED" if limit_min is None else f"{limit_min // 60:02d}:{limit_min % 60:02d}:00"
        state = draw(st.sampled_from(STATES))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 16, 24]))
        rows.append(f"{i}|{draw(st.sampled_from(['a', 'b', 'c']))}|{draw(st.sampled_from(['gpu', 'long']))}|"
                    f"{draw(st.sampled_from(['normal', 'high']))}|{t.isoformat()}|{(t + wait).isoformat()}|"
                    f"{(t + wait + timedelta(minutes=run_min)).isoformat()}|{limit}|{state}|"
                    f"{'3:0' if state == 'FAILED' else '0:0'}|gres/gpu={gpus}")
    policy = draw(st.sampled_from(["multifactor", "backfill"]))
    opts: dict = {"estimate": draw(st.sampled_from(["limit", "runtime"]))}
    if policy == "multifactor":
        for w in ("PriorityWeightAge", "PriorityWeightFairshare", "PriorityWeightJobSize", "PriorityWeightPartition",
                  "PriorityWeightQOS"):
            opts[w] = draw(st.sampled_from([0, 1, 1000, 100000]))
        opts["PriorityDecayHalfLife"] = draw(st.sampled_from([0, 30, "7-0"]))
        opts["PriorityCalcPeriod"] = draw(st.sampled_from([1, 5, 60]))
        opts["PriorityFavorSmall"] = draw(st.booleans())
        opts["backfill"] = draw(st.booleans())
        opts["shares"] = {"a": draw(st.integers(0, 5)), "b": 1}
        opts["qos_priority"] = {"high": 10}
    kw = {"policy": policy, "policy_options": opts, "seed": draw(st.integers(0, 100))}
    if draw(st.booleans()):
        kw["failures"] = {"per_gpu_hour": draw(st.floats(1e-4, 5e-3)), "repair_hours": draw(st.floats(0.1, 5))}
    if draw(st.booleans()):
        kw["horizon_days"] = draw(st.floats(0.2, 3))
    return "\n".join(rows) + "\n", kw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_replays_keep_every_invariant(history):
    text, kw = history
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sacct.txt"
        path.write_text(text)
        loaded = scenario([{"kind": "trace", "name": "h", "format": "sacct", "path": str(path)}],
                          pools=[pool("a", "H100", 2), pool("b", "A100", 1)], **kw)
        sim = build(loaded)
    checks = watch(sim)
    sim.run()
    check_now(sim)
    st_ = sim.state
    assert math.isclose(st_.alloc_gpu_s + st_.idle_gpu_s + st_.down_gpu_s, st_.capacity_gpu_s, rel_tol=1e-9,
                        abs_tol=1e-6)
    gt = gpu_time(list(sim.by_id.values()))
    used = sum(v for k, v in gt.items() if k not in ("busy", "work"))   # every use, restarts of both kinds
    assert math.isclose(used, st_.alloc_gpu_s, rel_tol=1e-6, abs_tol=1e-3)
    assert checks[0] > 0 or not any(j.first_start is not None for j in sim.by_id.values())
    for job in sim.by_id.values():
        if job.time_limit_s is not None and job.state in (COMPLETED, FAILED) and job.restarts == 0:
            assert job.end - job.first_start <= job.time_limit_s + 1e-6    # no run outlives its limit
    pending_or_running_are_reported(sim)
    if loaded.spec.horizon_days is None:
        assert not sim.partial
        for j in sim.by_id.values():
            assert j.state in (COMPLETED, FAILED, CANCELLED) or (j.state == PENDING and j.reason)
