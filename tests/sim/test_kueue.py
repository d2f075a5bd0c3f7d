"""Kueue beyond one cohort: flavors, borrowing and lending limits, reclaim, fair sharing, invariants."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import check_now, pool, scenario, watch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import UserError
from gpucluster.sim.jobs import COMPLETED
from gpucluster.sim.run import build, simulate

H = 3600.0


def jobs(name, t_hours, count, gpus, hours, **kw):
    """`count` jobs of `gpus` GPUs arriving together."""
    return {"kind": "training", "name": name, "arrivals": {"process": "once", "count": count, "start_hours": t_hours},
            "gpus": gpus, "duration_hours": hours, **kw}


def starts(res, cls):
    return sorted(j.first_start for j in res.jobs if j.cls == cls)


def run(w, queues, **kw):
    return simulate(scenario(w, policy="kueue", queues=queues, **kw))


def test_borrowing_stops_at_the_borrowing_limit():
    # 32 GPUs; a's nominal 8 + borrowing_limit 8: two 8-GPU jobs at once although b's 16 sit idle
    res = run([jobs("a", 0, 4, 8, 10, queue="a")],
              {"a": {"gpus": 8, "borrowing_limit": 8}, "b": {"gpus": 16}})
    assert starts(res, "a") == [0, 0, pytest.approx(10 * H), pytest.approx(10 * H)]
    # without the limit it borrows all of b's 16
    res = run([jobs("a", 0, 4, 8, 10, queue="a")], {"a": {"gpus": 8}, "b": {"gpus": 16}})
    assert starts(res, "a") == [0, 0, 0, pytest.approx(10 * H)]


def test_lending_limit_keeps_the_rest_for_its_queue():
    # a lends at most 8 of its 16: b (no quota) gets one 8-GPU job, not two
    res = run([jobs("b", 0, 3, 8, 10, queue="b")], {"a": {"gpus": 16, "lending_limit": 8}, "b": {"gpus": 0}})
    assert starts(res, "b") == [0, pytest.approx(10 * H), pytest.approx(20 * H)]


def test_other_cohorts_do_not_lend():
    q = {"a": {"gpus": 16, "cohort": "x"}, "b": {"gpus": 16, "cohort": "y"}}
    res = run([jobs("b", 0, 4, 8, 10, queue="b")], q)
    assert starts(res, "b") == [0, 0, pytest.approx(10 * H), pytest.approx(10 * H)]


def test_reclaim_preempts_the_fewest_most_recent_borrowed_workloads():
    # b borrows a's 16 with four 8-GPU jobs started one after another; a asks for 8 of its own at 1 h:
    # one victim is enough, the most recently started (Kueue's order), not all of b's borrowed jobs
    w = [jobs("b1", 0, 1, 8, 10, queue="b"), jobs("b2", 0.1, 1, 8, 10, queue="b"),
         jobs("b3", 0.2, 1, 8, 10, queue="b"), jobs("b4", 0.3, 1, 8, 10, queue="b"),
         jobs("a", 1, 1, 8, 1, queue="a")]
    res = run(w, {"a": {"gpus": 16}, "b": {"gpus": 16}})
    r = {j.cls: j for j in res.jobs}
    assert r["a"].first_start == pytest.approx(1 * H)
    assert [r[f"b{i}"].preemptions for i in range(1, 5)] == [0, 0, 0, 1]
    assert all(j.state == COMPLETED for j in res.jobs)


def test_reclaim_within_cohort_policies():
    w = [jobs("b", 0, 4, 8, 10, queue="b", priority=5), jobs("a", 1, 1, 8, 1, queue="a")]
    never = {"a": {"gpus": 16, "preemption": {"reclaim_within_cohort": "Never"}}, "b": {"gpus": 16}}
    assert starts(run(w, never), "a") == [pytest.approx(10 * H)]
    lower = {"a": {"gpus": 16, "preemption": {"reclaim_within_cohort": "LowerPriority"}}, "b": {"gpus": 16}}
    assert starts(run(w, lower), "a") == [pytest.approx(10 * H)]     # b's jobs have a higher priority
    anyp = {"a": {"gpus": 16, "preemption": {"reclaim_within_cohort": "Any"}}, "b": {"gpus": 16}}
    assert starts(run(w, anyp), "a") == [pytest.approx(1 * H)]


def test_no_reclaim_when_the_job_would_borrow():
    # a (nominal 8) asks for 16: it would borrow, so it may not reclaim from b
    w = [jobs("b", 0, 3, 8, 10, queue="b"), jobs("a", 1, 1, 16, 1, queue="a")]
    res = run(w, {"a": {"gpus": 8}, "b": {"gpus": 24}})
    assert starts(res, "a") == [pytest.approx(10 * H)]
    assert all(j.preemptions == 0 for j in res.jobs)


def test_within_cluster_queue_lower_priority():
    w = [jobs("low", 0, 1, 32, 10, queue="a", priority=0), jobs("high", 1, 1, 8, 1, queue="a", priority=10)]
    res = run(w, {"a": {"gpus": 32}})
    assert starts(res, "high") == [pytest.approx(H)]
    never = run(w, {"a": {"gpus": 32, "preemption": {"within_cluster_queue": "Never"}}})
    assert starts(never, "high") == [pytest.approx(10 * H)]


def test_fair_sharing_weights_order_admission():
    # a and b have no quota of their own and borrow the lender's 32 GPUs, 8 per job: 4 slots at t = 0.
    # b's jobs come first in the file. Weighted shares (borrowed / 32 / weight) decide the order.
    w = [jobs("b", 0, 8, 8, 1, queue="b"), jobs("a", 0, 8, 8, 1, queue="a")]

    def first_wave(wa, wb, fair=True):
        q: dict[str, dict[str, Any]] = {"lender": {"gpus": 32}, "a": {"gpus": 0}, "b": {"gpus": 0}}
        if fair:
            q["a"]["fair_sharing"] = {"weight": wa}
            q["b"]["fair_sharing"] = {"weight": wb}
        res = run(w, q)
        return sum(1 for j in res.jobs if j.first_start == 0 and j.cls == "a")

    assert first_wave(2, 1) == 3       # a: 0.125, (tie 0.25 goes to b), 0.25, 0.375 against b's 0.25, 0.5
    assert first_wave(1, 1) == 2
    assert first_wave(1, 2) == 1
    assert first_wave(0, 0, fair=False) == 0   # no fair sharing: FIFO, b's jobs came first


def test_flavors_send_jobs_to_their_gpu_type_in_order():
    pools = [pool("h", "H100", 2), pool("a", "A100-SXM4-80GB", 2)]
    q = {"t": {"flavors": {"H100": {"nominal_quota": 16}, "A100-SXM4-80GB": {"nominal_quota": 16}}},
         "h": {"flavors": {"H100": {"nominal_quota": 0}}}}
    res = run([jobs("t", 0, 3, 16, 10, queue="t")], q, pools=pools)
    t = sorted((j for j in res.jobs), key=lambda j: (j.first_start, j.id))
    assert [j.gpu_type for j in t[:2]] == ["H100-SXM5-80GB", "A100-SXM4-80GB"]   # the queue's order
    assert t[2].first_start == pytest.approx(10 * H)
    # a queue whose only flavor is H100 never runs on the idle A100s
    res = run([jobs("h", 0, 2, 16, 10, queue="h")], q, pools=pools)
    assert {j.gpu_type for j in res.jobs} == {"H100-SXM5-80GB"}
    assert starts(res, "h") == [0, pytest.approx(10 * H)]


def test_quota_errors_name_the_field():
    with pytest.raises(UserError, match="lending_limit 9 is above the nominal quota 8") as e:
        scenario([jobs("a", 0, 1, 8, 1)], policy="kueue", queues={"a": {"gpus": 8, "lending_limit": 9}})
    assert e.value.field == "queues.a"
    with pytest.raises(UserError, match=r"give gpus .* or flavors"):
        scenario([jobs("a", 0, 1, 8, 1)], policy="kueue",
                 queues={"a": {"gpus": 8, "flavors": {"H100": {"nominal_quota": 8}}}})
    loaded = scenario([jobs("a", 0, 1, 8, 1, queue="a")], policy="kueue",
                      queues={"a": {"flavors": {"B200": {"nominal_quota": 8}}}})
    with pytest.raises(UserError, match="flavor 'B200' is not a GPU type of the cluster") as e:
        build(loaded)
    assert e.value.field == "queues.a.flavors.B200"


def test_a_job_larger_than_its_quota_is_a_named_warning():
    res = run([jobs("big", 0, 1, 24, 1, queue="a"), jobs("ok", 0, 1, 8, 1, queue="a")],
              {"a": {"gpus": 8, "borrowing_limit": 8}, "b": {"gpus": 8}})
    warn = res.summary["warnings"]
    assert [w["code"] for w in warn] == ["larger_than_quota"]
    assert warn[0]["field"] == "workloads[0].gpus" and warn[0]["jobs"] == 1
    assert next(j for j in res.jobs if j.cls == "big").state == "cancelled"


# -- invariants --------------------------------------------------------------------------------------

@st.composite
def kueue_scenarios(draw):
    pools = [pool("h", "H100", draw(st.integers(1, 3)), 8), pool("a", "A100-SXM4-80GB", draw(st.integers(1, 2)), 8)]
    types = ["H100-SXM5-80GB", "A100-SXM4-80GB"]
    queues = {}
    for i in range(draw(st.integers(2, 4))):
        q = {"cohort": draw(st.sampled_from(["x", "y"])),
             "preemption": {"reclaim_within_cohort": draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
                            "within_cluster_queue": draw(st.sampled_from(["Never", "LowerPriority",
                                                                          "LowerOrNewerEqualPriority"]))}}
        if draw(st.booleans()):
            q["fair_sharing"] = {"weight": draw(st.sampled_from([0, 0.5, 1, 3]))}
        if draw(st.booleans()):
            q["queueing_strategy"] = "StrictFIFO"

        def limits(nominal):
            out = {}
            if draw(st.booleans()):
                out["borrowing_limit"] = draw(st.integers(0, 24))
            if draw(st.booleans()):
                out["lending_limit"] = draw(st.integers(0, nominal))
            return out
        if draw(st.booleans()):
            n = draw(st.integers(0, 24))
            q.update(gpus=n, **limits(n))
        else:
            fl = {}
            for t in draw(st.permutations(types))[:draw(st.integers(1, 2))]:
                n = draw(st.integers(0, 16))
                fl[t] = {"nominal_quota": n, **limits(n)}
            q["flavors"] = fl
        queues[f"q{i}"] = q
    names = list(queues)
    workloads = []
    for k in range(draw(st.integers(1, 4))):
        w = {"kind": "training", "name": f"w{k}", "queue": draw(st.sampled_from(names)),
             "priority": draw(st.integers(0, 3)),
             "arrivals": {"per_day": draw(st.floats(10, 200)), "count": draw(st.integers(1, 15))},
             "gpus": draw(st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=3)),
             "duration_hours": {"dist": "exponential", "mean": draw(st.floats(0.2, 6))},
             "checkpoint_minutes": 30}
        if draw(st.booleans()):
            w["gpu_types"] = [draw(st.sampled_from(types))]
        workloads.append(w)
    return scenario(workloads, pools=pools, policy="kueue", queues=queues, seed=draw(st.integers(0, 1000)))


def quota_invariants(sim) -> None:
    """From the running jobs alone: no queue over nominal + borrowing limit in any flavor, no cohort over
    its nominal total, nobody using another queue's guaranteed (unlendable) part."""
    spec = sim.policy.queues
    used: dict[tuple[str, str], float] = {}
    for j in sim.running.values():
        f = "*" if spec[j.queue].flavors is None else j.gpu_type
        assert spec[j.queue].flavors is None or f in spec[j.queue].flavors, "a job on a flavor its queue lacks"
        used[(j.queue, f)] = used.get((j.queue, f), 0.0) + j.gpu_share

    def quota(q, f):
        s = spec[q]
        if s.flavors is None:
            return (s.gpus, s.borrowing_limit, s.lending_limit) if f == "*" else (0, 0, 0)
        fq = s.flavors.get(f)
        return (fq.nominal_quota, fq.borrowing_limit, fq.lending_limit) if fq else (0, 0, 0)
    cohorts: dict[tuple[str, str], list[str]] = {}
    for (q, f) in used:
        cohorts.setdefault((spec[q].cohort, f), [])
    for q, s in spec.items():
        for f in ["*", *(s.flavors or {})]:
            if (s.cohort, f) in cohorts:
                cohorts[(s.cohort, f)].append(q)
    for (q, f), u in used.items():
        nominal, borrow, _ = quota(q, f)
        assert u <= nominal + (borrow if borrow is not None else 1e9) + 1e-9, (q, f, u)
    for (c, f), members in cohorts.items():
        total = sum(used.get((q, f), 0.0) for q in members)
        assert total <= sum(quota(q, f)[0] for q in members) + 1e-9, (c, f, total)
        lent = sum(max(0.0, used.get((q, f), 0.0) - (quota(q, f)[0] - (quota(q, f)[2] if quota(q, f)[2] is not None
                                                                        else quota(q, f)[0]))) for q in members)
        lendable = sum(quota(q, f)[2] if quota(q, f)[2] is not None else quota(q, f)[0] for q in members)
        assert lent <= lendable + 1e-9, (c, f, lent, lendable)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kueue_scenarios())
def test_quota_invariants_hold_at_every_event(loaded):
    sim = build(loaded)
    checks = watch(sim)

    def hook(*_):
        quota_invariants(sim)
    sim.hooks_start.append(hook)
    sim.hooks_stop.append(hook)
    sim.run()
    check_now(sim)
    # The invariants were checked at some event, unless no job could ever start (each job then
    # asks for more GPUs than the types its model runs on hold, and says so).
    assert checks[0] > 0 or all(j.reason and "more than the cluster has" in j.reason for j in sim.by_id.values())
    # every job ran, or was rejected with a reason, or is reported as never able to start
    for j in sim.by_id.values():
        assert j.state == COMPLETED or j.reason, (j.cls, j.state)
