"""The event kernel's ordering and the closed-form checkpoint arithmetic."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.sim.jobs import checkpoints_between, saved_at, segment_wall
from gpucluster.sim.kernel import Kernel


def test_events_run_by_time_then_priority_then_order():
    k = Kernel()
    seen: list[str] = []
    for name, t, p in [("c", 2.0, 0), ("b", 1.0, 5), ("a", 1.0, 1), ("a2", 1.0, 1), ("z", 0.5, 9)]:
        k.at(t, p, seen.append, name)
    k.run()
    assert seen == ["z", "a", "a2", "b", "c"]
    assert k.now == 2.0 and k.events == 5


def test_cancel_until_and_stop():
    k = Kernel()
    seen: list[str] = []
    tok = k.at(1.0, 0, seen.append, "gone")
    k.at(2.0, 0, seen.append, "kept")
    k.at(5.0, 0, seen.append, "late")
    k.cancel(tok)
    assert k.run(until=3.0) is False
    assert seen == ["kept"] and k.now == 3.0 and k.pending() == 1

    def stop(_):
        k.stop_requested = True
    k.at(4.0, 0, stop)
    assert k.run() is True and seen == ["kept"]


def test_streams_are_seeded_and_independent():
    a, b = Kernel(7), Kernel(7)
    assert a.stream("x").random() == b.stream("x").random()
    b.stream("y").random()   # another stream does not shift x
    assert a.stream("x").random() == b.stream("x").random()
    assert Kernel(8).stream("x").random() != Kernel(7).stream("x").random()


def brute(done, work, speed, tau, delta, restart, elapsed):
    """Walk the segment phase by phase (restart, work to the next checkpoint, write it, ...):
    returns (saved, checkpoint seconds, restart seconds)."""
    r = min(elapsed, restart)
    t, pos, saved, ck = r, done, done, 0.0
    next_ck = (math.floor(done / tau + 1e-12) + 1) * tau if tau > 0 else math.inf
    while t < elapsed and pos < work:
        target = min(next_ck, work)
        need = (target - pos) / speed
        if t + need > elapsed:
            break
        t, pos = t + need, target
        if target >= work:
            break
        w = min(delta, elapsed - t)
        ck, t = ck + w, t + w
        if w >= delta:
            saved = pos
        next_ck += tau
    return saved, ck, r


# write and restart times: zero or at least a millisecond (below that the clock's float resolution decides)
SECONDS = st.one_of(st.just(0.0), st.floats(1e-3, 1))


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 5), st.floats(5.1, 20), st.sampled_from([0.5, 1.0, 2.0]), st.floats(0.5, 4),
       SECONDS, SECONDS, st.floats(0, 25))
def test_saved_at_matches_stepping(done, work, speed, tau, delta, restart, elapsed):
    wall = segment_wall(done, work, speed, tau, delta, restart)
    elapsed = min(elapsed, wall)
    sp = saved_at(done, work, speed, tau, delta, restart, elapsed)
    assert math.isclose(sp.useful_s + sp.ckpt_s + sp.restart_s + sp.lost_s, elapsed, abs_tol=1e-9)
    # at a phase boundary (to float precision) either side is right: accept a match just before or after
    near = [brute(done, work, speed, tau, delta, restart, e) for e in (elapsed, elapsed - 1e-9, elapsed + 1e-9)]
    assert any(abs(sp.saved - b[0]) < 1e-6 and abs(sp.ckpt_s - b[1]) < 1e-6 for b in near), (sp, near)
    assert sp.restart_s == near[0][2]


def test_checkpoint_counts():
    assert checkpoints_between(0, 10, 3) == 3          # at 3, 6, 9
    assert checkpoints_between(3, 10, 3) == 2          # resumed at 3: 6, 9
    assert checkpoints_between(0, 9, 3) == 2           # none at the very end
    assert segment_wall(0, 10, 2, 3, 1, 5) == 5 + 5 + 3
    sp = saved_at(0, 10, 1, 3, 1, 0, 6)                # ckpt at 3 (written by 4), lost 4..6
    assert (sp.saved, sp.useful_s, sp.ckpt_s, sp.lost_s) == (3, 3, 1, 2)
    keep = saved_at(0, 10, 1, 3, 1, 0, 6, keep_all=True)
    assert keep.saved == 5 and keep.lost_s == 0


def test_cancel_of_an_event_that_already_ran_keeps_pending_exact():
    from gpucluster.sim.kernel import Kernel

    k = Kernel()
    ran: list[int] = []
    t1 = k.at(1.0, 0, ran.append, 1)
    k.at(2.0, 0, ran.append, 2)
    k.run(until=1.5)
    k.cancel(t1)          # already ran: ignored
    k.cancel(t1)
    assert k.pending() == 1
    k.run()
    assert ran == [1, 2] and k.pending() == 0
