"""Gavel's round-based policies under node failures and checkpoints (the event simulator).

Gavel's own simulator has no failures; here a job on a failed node loses the work since its
last checkpoint (periodic, or the one a round policy writes when it moves the job), goes back
to the queue, and the next round recomputes the allocation on the GPUs still up."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check_now, pending_or_running_are_reported, pool, scenario, watch

from gpucluster.sim.jobs import COMPLETED, PENDING
from gpucluster.sim.metrics import gpu_time
from gpucluster.sim.run import build
from gpucluster.sim.simulator import P_FAIL

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

POLICIES = ["fifo_perf", "max_min_fairness_perf", "gavel_fifo", "finish_time_fairness_perf"]
ROUND_S = 360.0


def _gavel(policy: str, *, failures: dict | None = None, ckpt_min: float | None = None, write_s: float = 0.0,
           restart_s: float = 0.0, per_type: int = 4, seed: int = 0):
    """The 40-job Gavel sample on per_type x (V100, P100, K80), one GPU per server as in Gavel."""
    pools = [pool(n, g, per_type, 1) for n, g in (("v100", "v100", ), ("p100", "p100"), ("k80", "k80"))]
    kw = {"failures": failures} if failures else {}
    wl = {"kind": "trace", "name": "philly", "format": "gavel", "path": "gavel_small.trace",
          "throughputs": "gavel_throughputs_2019_sample.json", "checkpoint_minutes": ckpt_min,
          "checkpoint_write_s": write_s, "restart_s": restart_s}
    return build(scenario([wl], pools=pools, policy=policy, seed=seed, **kw))


def _usable_capacity(sim) -> tuple[int, ...]:
    st = sim.state
    return tuple(int(st.node_gpus[st.usable & (st.node_type == st.type_index[t])].sum()) for t in st.pool_types)


def _watch_failures(sim, losses: list[tuple[float, float, float]]) -> None:
    """Record (work lost, checkpoint interval, work run in the segment) for every failure kill, and
    check that the killed job is back in the queue."""
    orig = sim.interrupt

    def interrupt(job, why, save=False, requeue=True):
        before, elapsed, speed = job.lost_gpu_s, sim.kernel.now - job.run_start, job.run_speed
        restart = job.run_restart
        orig(job, why, save=save, requeue=requeue)
        if why == "failure":
            lost_work = (job.lost_gpu_s - before) / job.gpu_share * speed
            losses.append((lost_work, job.ckpt_interval, max(0.0, elapsed - restart) * speed))
            if job.restarts <= job.max_retries:
                assert job.state == PENDING and job.id in {j.id for j in sim.queue}, "a killed job is re-queued"
        elif why == "preempted":
            assert save, "a round policy checkpoints the jobs it moves"
    sim.interrupt = interrupt


def _watch_rounds(sim) -> list[int]:
    """At every round: the allocation is the one for the GPUs up now, and never gives a type more
    GPU-time than it has (LP policies)."""
    pol = sim.policy
    rounds = [0]

    def hook():
        if pol.last_round == sim.kernel.now and pol.key_ids:
            rounds[0] += 1
            cap = _usable_capacity(sim)
            assert pol.key_cap == cap, "the allocation was not recomputed after a capacity change"
            if pol.allocator_name not in ("fifo", "fifo_perf"):
                scale = np.array([sim.by_id[i].gpus for i in pol.key_ids])
                assert np.all((scale[:, None] * pol.X).sum(axis=0) <= np.array(cap) + 1e-6)
    sim.hooks_pass.append(hook)
    return rounds


def _conserved(sim) -> None:
    s = sim.state
    assert math.isclose(s.alloc_gpu_s + s.idle_gpu_s + s.down_gpu_s, s.capacity_gpu_s, rel_tol=1e-9, abs_tol=1e-6)
    gt = gpu_time(list(sim.by_id.values()))
    used = sum(v for k, v in gt.items() if k not in ("busy", "work"))   # every use, restarts of both kinds
    assert math.isclose(used, s.alloc_gpu_s, rel_tol=1e-6, abs_tol=1e-3)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("ckpt_min", [None, 20.0])
def test_invariants_at_every_event_with_frequent_failures(policy, ckpt_min):
    # 0.1 failures per GPU-hour on 12 one-GPU servers: dozens of kills over the run, 1-5 h repairs
    sim = _gavel(policy, failures={"per_gpu_hour": 0.1, "repair_hours": {"dist": "uniform", "low": 1, "high": 5}},
                 ckpt_min=ckpt_min, write_s=30.0, restart_s=60.0)
    checks = watch(sim)
    rounds = _watch_rounds(sim)
    losses: list[tuple[float, float, float]] = []
    _watch_failures(sim, losses)
    sim.run()
    check_now(sim)
    _conserved(sim)
    pending_or_running_are_reported(sim)
    assert not sim.partial and checks[0] > 0 and rounds[0] > 0
    assert len(sim.failures.records) >= 10 and len(losses) >= 5        # the test exercises failures
    assert all(j.state == COMPLETED for j in sim.by_id.values())        # every job still finishes
    for lost, tau, ran in losses:   # a failure loses at most one interval, and never more than the segment ran
        assert lost <= ran + 1e-6
        if tau > 0:
            assert lost <= tau + 1e-6


def test_a_failure_mid_run_loses_the_work_since_the_last_checkpoint_and_requeues():
    # one 1-GPU job alone on 1 V100 + 1 P100 (FIFO_Perf: the fastest type, kept); its V100 fails at
    # 5,000 s: with 30-minute checkpoints it loses the work after 3,600 s and resumes on the next round
    sim = _gavel("fifo_perf", ckpt_min=30.0, per_type=1)
    first = min(sim.jobs, key=lambda j: j.submit)
    sim.jobs = [first]
    sim.by_id = {first.id: first}
    first.submit = 0.0
    first.work = 40_000.0
    first.speeds = {"V100-SXM2-16GB": 1.0, "P100-PCIe-16GB": 0.5, "K80": 0.25}
    killed_at = 5_000.0

    def fail(_):
        node = int(sim.state.gpu_node[first.placed_alloc[0]])
        assert sim.state.types[sim.state.node_type[node]] == "V100-SXM2-16GB"
        sim.fail_node(node)
        assert first.state == PENDING and first.done == pytest.approx(3_600.0)
        assert first.lost_gpu_s == pytest.approx(killed_at - 3_600.0)
    sim.kernel.at(killed_at, P_FAIL, fail)
    starts: list[tuple[float, str]] = []
    sim.hooks_start.append(lambda j: starts.append((sim.kernel.now, j.gpu_type)))
    sim.run()
    # back at the next round (5,040 s) on the P100, the only type up: 36,400 s of work at half speed
    assert starts == [(0.0, "V100-SXM2-16GB"), (5_040.0, "P100-PCIe-16GB")]
    assert first.end == pytest.approx(5_040.0 + 36_400.0 / 0.5)
    assert first.restarts == 1


def test_time_sharing_checkpoints_bound_the_loss_without_periodic_checkpoints():
    # two jobs share one GPU under max-min fairness: each is moved out every round or two, checkpointing
    # on the way out, so a failure loses at most the time since it resumed, not everything
    sim = _gavel("max_min_fairness_perf", per_type=1,
                 failures={"per_gpu_hour": 0.05, "repair_hours": 0.5})
    losses: list[tuple[float, float, float]] = []
    _watch_failures(sim, losses)
    sim.run()
    _conserved(sim)
    assert losses
    for lost, _, ran in losses:
        assert lost <= ran + 1e-6


@pytest.mark.parametrize("policy", ["fifo_perf", "max_min_fairness_perf", "gavel_fifo"])
def test_failures_that_never_fire_and_free_checkpoints_change_nothing(policy):
    def ends(sim) -> list[float]:
        sim.run()
        return [sim.by_id[i].end for i in sorted(sim.by_id)]
    base = ends(_gavel(policy))
    # a failure process at a rate that fires after the run (its own random stream: the policy's
    # draws are unchanged) and checkpoints that cost nothing give the same completions
    quiet = _gavel(policy, failures={"per_gpu_hour": 1e-12})
    assert ends(quiet) == base and not quiet.failures.records
    assert ends(_gavel(policy, ckpt_min=20.0)) == pytest.approx(base, rel=1e-12)


# -- gangs on NVLink nodes beside one-GPU servers ------------------------------------------------

def _h100_pool(count: int) -> dict:
    return {"name": "h100", "count": count, "gpu": "H100", "gpus_per_node": 8, "cpu_cores": 96, "ram_gib": 2048,
            "nics_per_node": 8, "nic": "NDR400"}


def _gangs(policy: str, placement: str | None = None, count: int = 6):
    opts = {"placement": placement} if placement else {}
    wl = {"kind": "training", "name": "llm", "arrivals": {"process": "once", "count": count},
          "gpus": [16, 32], "duration_hours": 2.0, "gpu_types": ["H100"]}
    return build(scenario([wl], pools=[pool("v100", "v100", 40, 1), _h100_pool(8)], policy=policy,
                          policy_options=opts))


def test_a_gang_filling_the_leaves_of_its_own_pool_is_not_counted_as_spread():
    # 40 one-NIC servers share a leaf switch; 8-NIC H100 nodes fit 4 to a leaf: 8 H100 nodes need 2
    # leaves, not 1 (the cluster's fullest leaf), so a 64-GPU gang on them runs at full speed
    from gpucluster.sim.placement import leaves_used
    sim = _gangs("max_min_fairness_perf")
    st = sim.state
    h100 = np.flatnonzero(st.node_gpus == 8)
    assert len(np.unique(st.node_leaf[h100])) == 2 and st.leaf_size > 4
    gpus = np.concatenate([np.arange(st.first_gpu[n], st.first_gpu[n] + 8) for n in h100])
    assert leaves_used(st, gpus) == (2, 2)
    assert leaves_used(st, gpus[:32]) == (1, 1)
    one_per_leaf = np.concatenate([np.arange(st.first_gpu[n], st.first_gpu[n] + 8) for n in (h100[0], h100[-1])])
    assert leaves_used(st, one_per_leaf) == (2, 1)


@pytest.mark.parametrize("placement", ["pack", "topology"])
def test_round_policy_placement_option(placement):
    sim = _gangs("max_min_fairness_perf", placement)
    spread: list[int] = []
    sim.hooks_start.append(lambda j: spread.append(j.leaves))
    checks = watch(sim)
    sim.run()
    _conserved(sim)
    assert checks[0] > 0 and all(j.state == COMPLETED for j in sim.by_id.values())
    if placement == "topology":   # 16- and 32-GPU gangs always fit one leaf of 4 nodes when they fit at all
        assert set(spread) == {1}


def test_round_policy_placement_must_be_known():
    from gpucluster.errors import UserError
    with pytest.raises(UserError, match="placement must be one of pack, topology"):
        _gangs("max_min_fairness_perf", "scatter")


def test_benchmark_prints_one_json_object_per_run():
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    if not (root.parent / "shared" / "traces" / "philly" / "2869ce.trace").is_file():
        pytest.skip("the Philly trace 2869ce is in ../shared/traces (outside the repo)")
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "sim_gavel_beyond.py"), "failures", "--jobs", "6",
                        "--policies", "fifo_perf", "--rates", "llama3", "--intervals", "none,young", "--json"],
                       capture_output=True, text=True, cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["failures"], x["checkpoint"]) for x in rows] == [("none", "none"), ("llama3", "none"),
                                                                ("llama3", "young")]
    for x in rows:
        assert x["jobs"] == x["completed"] == 6 and x["mean_jct_h"] > 0 and 0 < x["goodput"] <= 1
    assert rows[0]["failures_n"] == 0 and rows[0]["lost_failures_gpu_h"] == 0
    assert rows[2]["young_1gpu_h"] > 1    # Young's interval for one GPU at Llama 3's rate: hours, not minutes
