"""Slurm's multifactor priority against hand-computed values of its documented formulas
(https://slurm.schedmd.com/priority_multifactor.html), and the order it gives a replay."""

from __future__ import annotations

import math

import pytest

from gpucluster.errors import UserError
from gpucluster.sim.jobs import COMPLETED, Job
from gpucluster.sim.policies import load_all
from gpucluster.sim.policies.fairshare import FairShare, decay_factor, decayed_integral, fairshare_factor
from gpucluster.sim.policies.multifactor import (
    Multifactor,
    age_factor,
    size_factor,
    slurm_priority,
    slurm_time_s,
)
from gpucluster.sim.run import simulate
from gpucluster.specs.workload import filled
from helpers import scenario

HEADER = "JobID|Account|Partition|QOS|Submit|Start|End|Timelimit|State|AllocTRES"


def at(minutes: float) -> str:
    from datetime import datetime, timedelta
    return (datetime(2024, 5, 1) + timedelta(minutes=minutes)).isoformat()


def sacct(tmp_path, rows: list[tuple]) -> str:
    """rows: (id, account, partition, qos, submit min, run min, limit, gpus); recorded Start = Submit."""
    lines = [HEADER]
    for jid, acct, part, qos, sub, run, limit, gpus in rows:
        lines.append(f"{jid}|{acct}|{part}|{qos}|{at(sub)}|{at(sub)}|{at(sub + run)}|{limit}|COMPLETED|"
                     f"gres/gpu={gpus}")
    p = tmp_path / "sacct.txt"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


# -- the factors ------------------------------------------------------------------------

def test_age_factor_is_time_eligible_over_max_age_capped():
    week = 7 * 86400
    assert age_factor(3.5 * 86400, week) == 0.5
    assert age_factor(0, week) == 0.0
    assert age_factor(30 * 86400, week) == 1.0


def test_classic_fairshare_factor_two_to_minus_usage_over_shares():
    # shares 1 and 3 (normalized 0.25, 0.75), usage 300 and 100 GPU-s (normalized 0.75, 0.25)
    fs = FairShare({"a": 1, "b": 3}, half_life_s=0)
    fs.usage = {"a": 300.0, "b": 100.0}
    f = fs.factors(0.0)
    assert f["a"] == pytest.approx(2 ** -3)               # 2^(-0.75/0.25) = 0.125
    assert f["b"] == pytest.approx(2 ** (-1 / 3))          # 2^(-0.25/0.75) = 0.794
    assert fairshare_factor(0.0, 0.5) == 1.0 and fairshare_factor(0.5, 0.5) == 0.5
    assert fairshare_factor(0.3, 0.0) == 0.0               # no shares: no priority from fair share


def test_usage_decays_by_the_half_life():
    day = 86400.0
    ln2 = math.log(2)
    assert decay_factor(2 * day, day) == 0.25 and decay_factor(5 * day, 0) == 1.0
    fs = FairShare({"a": 1}, half_life_s=day)
    fs.on_start("a", 4, 0.0)
    fs.factors(day)                    # 4 GPUs for a day, each second decayed since: 4 x H/ln2 x (1 - 1/2)
    assert fs.usage["a"] == pytest.approx(2 * day / ln2)
    fs.factors(2 * day)                # the first day halves, the second adds the same again
    assert fs.usage["a"] == pytest.approx(day / ln2 + 2 * day / ln2)
    fs.on_stop("a", 4, 2.5 * day)      # it ends at 2.5 days
    fs.factors(3 * day)                # (2, 2.5] used, seen from 3: 4 H/ln2 (2^-0.5 - 2^-1)
    tail = 4 * day / ln2 * (2 ** -0.5 - 2 ** -1)
    assert fs.usage["a"] == pytest.approx(3 * day / ln2 / 2 + tail)
    fs.factors(4 * day)                # nothing runs any more: decay only
    assert fs.usage["a"] == pytest.approx((3 * day / ln2 / 2 + tail) / 2)
    flat = FairShare({"a": 1}, half_life_s=0)   # no decay: GPU-seconds
    flat.on_start("a", 2, 10.0)
    flat.on_stop("a", 2, 110.0)
    flat.factors(1e6)
    assert flat.usage["a"] == 200.0


def test_decay_is_the_limit_of_slurms_per_period_sum():
    # Slurm: U = sum over 5-minute periods of the period's usage x D^(periods ago), D = 2^(-5 min / H)
    h, p, gpus, n = 7 * 86400.0, 300.0, 8, 2016       # a week of 8 GPUs, in 5-minute periods
    d = 2 ** (-p / h)
    slurm = sum(gpus * p * d ** i for i in range(n))
    assert gpus * decayed_integral(n * p, h) == pytest.approx(slurm, rel=p / h)
    assert decayed_integral(100.0, 0) == 100.0   # no decay


def test_job_size_factor_as_slurm_averages_nodes_and_gpus():
    # 2 of 10 nodes, 16 of 80 GPUs: (0.2 + 0.2) / 2; PriorityFavorSmall flips it
    assert size_factor(2, 10, 16, 80, False) == pytest.approx(0.2)
    assert size_factor(1, 10, 4, 80, False) == pytest.approx((0.1 + 0.05) / 2)
    assert size_factor(1, 10, 4, 80, True) == pytest.approx(1 - 0.075)


def test_priority_is_the_weighted_sum_truncated():
    w: dict[str, float] = {"PriorityWeightAge": 1000, "PriorityWeightFairshare": 10000,
                           "PriorityWeightJobSize": 500, "PriorityWeightPartition": 1000, "PriorityWeightQOS": 2000}
    f = {"PriorityWeightAge": 0.5, "PriorityWeightFairshare": 2 ** -3, "PriorityWeightJobSize": 0.075,
         "PriorityWeightPartition": 1.0, "PriorityWeightQOS": 0.5}
    # 500 + 1250 + 37.5 + 1000 + 1000 = 3787.5 -> 3787
    assert slurm_priority(w, f) == 3787
    assert slurm_priority({k: 0.0 for k in w}, f) == 1       # 0 is a held job in Slurm: at least 1


def test_factors_of_a_job_in_the_policy():
    pol = Multifactor({"PriorityWeightQOS": 1, "qos_priority": {"normal": 10, "high": 40},
                       "partition_priority": {"gpu": 2, "debug": 8}, "PriorityMaxAge": "2-0"})
    from gpucluster.sim.policies.base import View
    from gpucluster.sim.state import ClusterState, NodeInfo
    st = ClusterState([NodeInfo(f"n{i}", "a", "H100-SXM5-80GB", 8) for i in range(4)])
    view = View(0.0, st, [], {}, True, set(), 0)
    job = Job(id=1, cls="c", kind="batch", gpus=16, submit=0.0, work=1.0, qos="normal", partition="gpu",
              account="x")
    f = pol.factors(job, 86400.0, {"x": 0.5}, view)
    assert f["PriorityWeightAge"] == 0.5 and f["PriorityWeightFairshare"] == 0.5
    assert f["PriorityWeightQOS"] == 0.25 and f["PriorityWeightPartition"] == 0.25
    assert f["PriorityWeightJobSize"] == pytest.approx((2 / 4 + 16 / 32) / 2)
    unknown = Job(id=2, cls="c", kind="batch", gpus=1, submit=0.0, work=1.0, qos="other", partition="p",
                  account="x")
    g = pol.factors(unknown, 0.0, {"x": 1.0}, view)
    assert g["PriorityWeightQOS"] == 0.0 and g["PriorityWeightPartition"] == 1 / 8   # Slurm defaults 0 and 1


def test_slurm_time_options():
    assert slurm_time_s("7-0", "x") == 7 * 86400 and slurm_time_s(5, "x") == 300 and slurm_time_s("1:00:00", "x") == 3600
    pol = Multifactor({})
    assert (pol.max_age_s, pol.half_life_s, pol.calc_period_s) == (7 * 86400, 7 * 86400, 300)
    assert all(v == 0 for v in pol.weights.values())       # Slurm's default weights


@pytest.mark.parametrize("options, field", [
    ({"PriorityWeightAge": -1}, "PriorityWeightAge"), ({"PriorityWeightQOS": "high"}, "PriorityWeightQOS"),
    ({"PriorityMaxAge": "a week"}, "PriorityMaxAge"), ({"shares": {"a": -1}}, "shares"),
    ({"backfill": "yes"}, "backfill"), ({"estimate": "guess"}, "estimate"),
])
def test_bad_options_are_one_clear_error(options, field):
    with pytest.raises(UserError) as e:
        Multifactor(options)
    assert field in str(e.value.field)


def test_unknown_option_lists_slurms_names():
    with pytest.raises(UserError, match="PriorityWeightAge"):
        load_all().get("multifactor")({"PriorityWeightAgeing": 1})


# -- the order in a replay --------------------------------------------------------------

def _starts(tmp_path, rows, **options) -> dict[str, float]:
    w = [{"kind": "trace", "name": "h", "format": "sacct", "path": sacct(tmp_path, rows)}]
    from helpers import pool
    res = simulate(scenario(w, policy="multifactor", policy_options=options, pools=[pool("a", "H100", 1, 8)]))
    assert all(j.state == COMPLETED for j in res.jobs)
    names = [r[0] for r in rows]
    return {n: filled(j.first_start) / 60 for n, j in zip(names, sorted(res.jobs, key=lambda j: j.seq), strict=True)}


# A blocker holds the 8 GPUs for 60 min. Account "heavy" ran 8 GPUs for 100 min before; "light"
# nothing. Then heavy submits at 150 min, light at 155 min, both 8 GPUs for 10 min.
FS_ROWS = [("old", "heavy", "gpu", "normal", 0, 100, "02:00:00", 8),
           ("block", "light", "gpu", "normal", 100, 60, "02:00:00", 8),
           ("h", "heavy", "gpu", "normal", 150, 10, "00:30:00", 8),
           ("l", "light", "gpu", "normal", 155, 10, "00:30:00", 8)]


def test_fairshare_puts_the_light_account_first(tmp_path):
    s = _starts(tmp_path, FS_ROWS, PriorityWeightFairshare=10000, PriorityDecayHalfLife="7-0")
    assert s["block"] == 100 and s["l"] == 160 and s["h"] == 170
    f = _starts(tmp_path, FS_ROWS)                # Slurm's default weights (0): first come, first served
    assert f["h"] == 160 and f["l"] == 170


def test_a_short_half_life_forgets_old_usage(tmp_path):
    # by 160 min, heavy's 100-min usage has decayed through ~20 half-lives of 5 min, light's
    # blocker ran until 160 (its usage is the recent one): heavy goes first
    s = _starts(tmp_path, FS_ROWS, PriorityWeightFairshare=10000, PriorityDecayHalfLife=5, PriorityCalcPeriod=1)
    assert s["h"] == 160 and s["l"] == 170


def test_qos_and_partition_weights(tmp_path):
    rows = [("block", "a", "gpu", "normal", 0, 60, "02:00:00", 8),
            ("n", "a", "gpu", "normal", 10, 10, "00:30:00", 8),
            ("hi", "a", "gpu", "high", 20, 10, "00:30:00", 8),
            ("dbg", "a", "debug", "normal", 30, 10, "00:30:00", 8)]
    s = _starts(tmp_path, rows, PriorityWeightQOS=1000, qos_priority={"normal": 0, "high": 10})
    assert s["hi"] == 60 and s["n"] == 70 and s["dbg"] == 80
    p = _starts(tmp_path, rows, PriorityWeightQOS=1000, PriorityWeightPartition=5000,
                qos_priority={"normal": 0, "high": 10}, partition_priority={"gpu": 1, "debug": 10})
    assert p["dbg"] == 60 and p["hi"] == 70 and p["n"] == 80


def test_age_lets_an_old_job_overtake(tmp_path):
    # big waits since 5 min, small (higher size factor with FavorSmall) since 30 min;
    # with age weight >> size weight the older one goes first, the other way round without
    rows = [("block", "a", "gpu", "normal", 0, 60, "02:00:00", 8),
            ("old", "a", "gpu", "normal", 5, 10, "00:30:00", 8),
            ("small", "a", "gpu", "normal", 30, 10, "00:30:00", 4)]
    young = _starts(tmp_path, rows, PriorityWeightJobSize=1000, PriorityFavorSmall=True)
    assert young["small"] == 60 and young["old"] == 70
    aged = _starts(tmp_path, rows, PriorityWeightJobSize=1000, PriorityFavorSmall=True, PriorityWeightAge=100000,
                   PriorityMaxAge=60)
    assert aged["old"] == 60 and aged["small"] == 70


def test_backfill_under_multifactor_and_strict_order(tmp_path):
    # 8 GPUs: block uses 4 for 60 min; head (high priority) needs 8; a 4-GPU job of 20 min with a
    # 30-min limit ends before block's limit (60 min): sched/backfill starts it, sched/builtin does not
    rows = [("block", "a", "gpu", "normal", 0, 60, "01:00:00", 4),
            ("head", "a", "gpu", "high", 1, 10, "00:30:00", 8),
            ("fill", "a", "gpu", "normal", 2, 20, "00:30:00", 4)]
    opts = {"PriorityWeightQOS": 1000, "qos_priority": {"high": 1}}
    bf = _starts(tmp_path, rows, **opts)
    assert bf["fill"] == 2 and bf["head"] == 60
    strict = _starts(tmp_path, rows, backfill=False, **opts)
    assert strict["head"] == 60 and strict["fill"] == 70


def test_usage_follows_every_start_and_stop_of_the_run(tmp_path):
    from gpucluster.sim.run import build
    w = [{"kind": "trace", "name": "h", "format": "sacct", "path": sacct(tmp_path, FS_ROWS)}]
    from helpers import pool
    sim = build(scenario(w, policy="multifactor", policy_options={"PriorityWeightFairshare": 1,
                                                                    "PriorityDecayHalfLife": "1-0"},
                         pools=[pool("a", "H100", 1, 8)]))
    sim.run()
    h = 86400.0
    end = sim.end_time
    sim.policy.fairshare.factors(end)

    def used(gpus, a, b):   # a job on [a, b], as it counts at the end
        return gpus * (decayed_integral(end - a, h) - decayed_integral(end - b, h))
    expect = {"heavy": 0.0, "light": 0.0}
    for j in sim.by_id.values():
        expect[j.account] += used(j.gpus, j.first_start, j.end)
    assert sim.policy.fairshare.usage["heavy"] == pytest.approx(expect["heavy"])
    assert sim.policy.fairshare.usage["light"] == pytest.approx(expect["light"])
    assert expect["heavy"] > expect["light"] > 0
