"""A trace run in rounds over arrays and lists (Gavel's simulator, without its Python objects).

Time starts at 0 and is cut into rounds of `round_s`. At each round's start the jobs that
arrived are admitted, the allocation is recomputed if the set of jobs changed, and the
mechanism picks who runs where. A job that runs on a type it did not hold in the previous
round (and has run before) first pays `switch_s` (checkpoint restore); a job that finishes
mid-round frees its GPUs only at the next round, as in Gavel. When the allocation is
integral and every allocated job runs (FIFO, an underloaded cluster), nothing can change
before the next arrival or completion, so those rounds are advanced in one step.

Utilization is Gavel's: GPU-seconds jobs held (switch time included) over GPUs x makespan,
makespan being the last completion (time 0 is the trace's origin).

Speed (docs/simulator.md, "Gavel"): a round is one numpy priority sort over the (job, type)
pairs with X > 0 and Python over its few winners; every result is the same, bit for bit, as
the round-by-round numpy reference in tests/sim/test_gavel_exact.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpucluster.sim.rounds.allocation import Allocator, Problem
from gpucluster.sim.rounds.mechanism import Pairs


@dataclass
class RoundResult:
    end_s: np.ndarray          # completion time per job (nan: did not finish)
    arrival_s: np.ndarray
    scale: np.ndarray
    busy_gpu_s: float
    makespan_s: float
    gpus: int
    rounds: int
    solves: int
    switches: int
    busy_gpu_s_by_type: np.ndarray | None = None   # GPU-seconds held per type (cost per GPU type)

    @property
    def finished(self) -> np.ndarray:
        return ~np.isnan(self.end_s)

    @property
    def jct_s(self) -> np.ndarray:
        return (self.end_s - self.arrival_s)[self.finished]

    @property
    def utilization(self) -> float:
        return self.busy_gpu_s / (self.gpus * self.makespan_s) if self.makespan_s > 0 else 0.0


Check = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def admit(arrival_sorted: list[float], order: np.ndarray, runnable: np.ndarray, nxt: int, t: float,
          round_s: float, active: list[int]) -> tuple[int, float, bool]:
    """A round's start: the runnable jobs that arrived by `t` join `active` (in arrival order);
    with none active, time skips to the round of the next arrival. Returns the next arrival's
    position, the time, and whether a job joined (the allocation must be recomputed)."""
    joined = False
    n = len(arrival_sorted)
    while nxt < n and arrival_sorted[nxt] <= t:
        j = int(order[nxt])
        if runnable[j]:
            active.append(j)
            joined = True
        nxt += 1
    if not active and nxt < n:
        t = max(t + round_s, math.ceil(arrival_sorted[nxt] / round_s) * round_s)
    return nxt, t, joined


def run_rounds(arrival_s: np.ndarray, scale: np.ndarray, steps: np.ndarray, throughput: np.ndarray,
               capacity: np.ndarray, allocator: Allocator, *, round_s: float = 360.0, switch_s: float = 0.0,
               prices: np.ndarray | None = None, max_s: float = 3650 * 86400.0,
               check: Check | None = None) -> RoundResult:
    """Run jobs (arrival, GPUs, steps, steps/s per type) on `capacity` GPUs per type.

    `check(X, assignment, scale, capacity)` is called every round (tests' invariants)."""
    if round_s <= 0 or switch_s < 0 or switch_s >= round_s:
        raise ValueError("round_s > 0 and 0 <= switch_s < round_s")
    arr = np.asarray(arrival_s, dtype=float)
    sc = np.asarray(scale, dtype=np.int64)
    T = np.asarray(throughput, dtype=float)
    cap = np.asarray(capacity, dtype=np.int64)
    cap_list = cap.tolist()
    N, K = T.shape
    order = np.argsort(arr, kind="stable")
    arr_o = arr[order].tolist()               # arrivals in order, as Python floats: read every round
    rem = np.asarray(steps, dtype=float).copy()
    end = np.full(N, np.nan)
    service = np.zeros(N)
    prev = np.full(N, -1, dtype=np.int64)
    # a job no type can ever hold never runs (Gavel would wait forever): leave it out
    runnable = np.asarray(((T > 0) & (sc[:, None] <= cap[None, :])).any(axis=1))
    # GPU-seconds of a round where no job ends are whole GPUs x round_s: with an integral round_s
    # they are exact sums in any order, so they are added per type. Otherwise (a job ends, or a
    # fractional round_s) they are summed per job as numpy sums them, for the same last bit.
    exact = float(round_s).is_integer() and float(cap.sum()) * round_s < 2.0 ** 52
    active: list[int] = []
    nxt, t, since = 0, 0.0, 0.0
    busy, rounds, solves, switches = 0.0, 0, 0, 0
    by_type = [0.0] * K
    # Between two allocations the active jobs' state lives in Python lists indexed by position
    # in A (rem_l, prev_l, ran_l: has run since it arrived), which a round reads and writes for a
    # few winners, where numpy's per-call cost would dominate; and in numpy arrays what the
    # priority sort reads whole: svc_a (service per job), rec_p (time received per pair since
    # the allocation).
    A = np.zeros(0, dtype=np.int64)
    X = np.zeros((0, K))
    scA = sc[A]
    rem_l: list[float] = []
    prev_l: list[int] = []
    ran_l: list[bool] = []
    svc_a = np.zeros(0)
    state_a = np.zeros(0)                     # rec_p then svc_a, one array: a round adds to both in one call
    unrun = 0                                 # pairs that have received no time since the allocation
    got_l: list[bool] = []
    settled = False                           # every job of a pair arrived >= 1 s ago: max(t - arrival, 1) = t - arrival
    pairs = Pairs(X, scA)
    rec_p = np.zeros(0)
    p_arr = np.zeros(0)
    P = 0
    rate_l: list[float] = []
    p_tab: list[tuple[int, int, int, float, float]] = []   # per pair: job, type, GPUs, rate, steps in a whole round
    jobs, types, need_l = pairs.jobs, pairs.types, pairs.need
    p_job, neg_x, neg_x_big = pairs.job, pairs.neg_x, pairs.neg_x_big
    m_a, smallest = pairs.m, pairs.smallest
    lexsort = np.lexsort
    limit = round_s + 1e-9                    # a job whose remaining time is within this ends this round
    last: list[int] = []                      # jobs that ran in the previous round
    integral, held_jobs = False, 0
    changed = False
    while (nxt < N or active) and t < max_s:
        nxt, t, admitted = admit(arr_o, order, runnable, nxt, t, round_s, active)
        changed = changed or admitted
        if not active:
            continue
        if changed:
            rem[A], service[A], prev[A] = rem_l, svc_a, prev_l
            A = np.array(active, dtype=np.int64)
            arrA, scA, TA = arr[A], sc[A], T[A]
            rem_l, prev_l = rem[A].tolist(), prev[A].tolist()
            ran_l = (service[A] > 0).tolist()
            last = np.flatnonzero(prev[A] >= 0).tolist()
            # the policies see speeds relative to each job's fastest type and work in seconds there,
            # as the event simulator's jobs carry them: the same LP, whichever driver asks
            best = TA.max(axis=1)
            X = allocator.allocate(Problem(A, TA / best[:, None], scA, cap, prices, t - arrA, rem[A] / best))
            solves += 1
            pairs = Pairs(X, scA)
            P = len(pairs)
            state_a = np.zeros(P + len(A))
            state_a[P:] = service[A]
            rec_p, svc_a = state_a[:P], state_a[P:]
            unrun, got_l = P, [False] * P
            p_arr = arrA[pairs.job]
            settled = bool(np.all(t - p_arr >= 1.0))   # t only grows: stays true until the next allocation
            rate_l = TA[pairs.job, pairs.type].tolist()
            jobs, types, need_l = pairs.jobs, pairs.types, pairs.need
            p_tab = [(j, k, n, rate, rate * round_s) for j, k, n, rate in zip(jobs, types, need_l, rate_l, strict=True)]
            p_job, neg_x, neg_x_big = pairs.job, pairs.neg_x, pairs.neg_x_big
            m_a, smallest = pairs.m, pairs.smallest
            since = 0.0
            changed = False
            # an integral X (FIFO, an underloaded cluster) may be a fixed point: see below
            integral = bool(np.all((X == 0) | (X >= 1 - 1e-9)))
            held_jobs = int(np.count_nonzero(X.sum(axis=1) > 0))
        rounds += 1
        ended: list[tuple[int, float]] = []   # (job, seconds it ran) of those that finish
        # Pairs.order then Pairs.winners (as `assign` runs them), each winner's round applied as
        # it is picked: one pass over the pairs (the order a round's winners are applied in
        # changes no result: each touches its own job; sums over them are made in job order below)
        win: list[int] = []
        now: list[int] = []                   # their jobs
        left = cap_list.copy()
        ran_now = [False] * m_a
        if P:
            elapsed = t - p_arr
            svc_p = svc_a[p_job] / (elapsed if settled else np.maximum(elapsed, 1.0))
            if since <= 0:
                key = neg_x_big
            elif unrun == 0:
                key = neg_x / (rec_p / since)
            else:
                frac = rec_p / since
                key = neg_x_big.copy()        # -(x / frac) is (-x) / frac, bit for bit
                np.divide(neg_x, frac, out=key, where=frac > 0)
            todo = m_a
            # lexsort is stable: equal (priority, service) keep pair order, which is by job
            for i in lexsort((svc_p, key)).tolist():
                j, k, n, rate, step = p_tab[i]
                if n > left[k] or ran_now[j]:
                    continue
                ran_now[j] = True
                left[k] -= n
                win.append(i)
                now.append(j)
                r = rem_l[j]
                lossy = False
                if prev_l[j] != k:
                    prev_l[j] = k
                    if not ran_l[j]:
                        ran_l[j] = True
                    else:
                        switches += 1
                        lossy = switch_s > 0      # resumes or moves: loses switch_s of the round
                if lossy:
                    if r / rate <= round_s - switch_s + 1e-9:
                        rem_l[j] = 0.0
                        ended.append((j, switch_s + r / rate))
                    else:
                        rem_l[j] = r - rate * (round_s - switch_s)
                # as with a loss of 0.0: round_s - 0.0 + 1e-9, 0.0 + r / rate, rate * (round_s - 0.0)
                elif r / rate <= limit:
                    rem_l[j] = 0.0
                    ended.append((j, r / rate))
                else:
                    rem_l[j] = r - step
                todo -= 1
                if todo == 0 or (left[k] < smallest and max(left) < smallest):
                    break
        if check is not None:
            asg = np.full(len(A), -1, dtype=np.int64)
            asg[pairs.job[win]] = pairs.type[win]
            check(X, asg, scA, cap)
        if unrun:
            for i in win:
                if not got_l[i]:
                    got_l[i] = True
                    unrun -= 1
        for j in last:                        # those that ran last round and not this one: -1
            if not ran_now[j]:
                prev_l[j] = -1
        if ended or not exact or integral:    # job order, as the original per-job arrays were
            win.sort()
            now = [jobs[i] for i in win]
        last = now
        since += round_s
        if ended or not exact:
            # per job, in job order, as numpy sums them: the same bits as per-job arrays give
            fin = dict(ended)
            used_a = np.array([fin.get(j, round_s) for j in now])
            rec_p[np.array(win, dtype=np.intp)] += used_a
            svc_a[np.array(now, dtype=np.intp)] += used_a
            h = np.array([need_l[i] for i in win]) * used_a
            busy += float(h.sum())
            per_type = np.bincount(np.array([types[i] for i in win], dtype=np.int64), weights=h, minlength=K)
            for k in range(K):
                by_type[k] += float(per_type[k])
        else:
            state_a[np.array(win + [P + j for j in now], dtype=np.intp)] += round_s
            gpus = [c - lk for c, lk in zip(cap_list, left, strict=True)]
            busy += float(sum(gpus) * round_s)
            for k in range(K):
                by_type[k] += gpus[k] * round_s
        if ended:
            for j, used in ended:
                end[A[j]] = t + used
            done = {int(A[j]) for j, _ in ended}
            active = [j for j in active if j not in done]
            changed = True
            t += round_s
            continue
        t += round_s
        # a fixed point: integral X and every job holding an allocation runs there -> nothing
        # changes before the next arrival or completion: advance those rounds in one step
        if not integral or len(win) == 0 or len(win) != held_jobs or any(pairs.x_list[i] < 1 - 1e-9 for i in win):
            continue
        n = min(math.floor(rem_l[jobs[i]] / (rate_l[i] * round_s) - 1e-9) for i in win)
        if nxt < N:
            n = min(n, math.ceil(arr_o[nxt] / round_s - 1e-9) - round(t / round_s))
        if n >= 1:
            d = n * round_s
            per_k = [0.0] * K
            for i in win:                     # job order, as np.bincount adds its weights
                j = jobs[i]
                rem_l[j] -= rate_l[i] * d
                per_k[types[i]] += need_l[i] * d
            state_a[np.array(win + [P + j for j in now], dtype=np.intp)] += d
            busy += float(sum(need_l[i] for i in win)) * d
            for k in range(K):
                by_type[k] += per_k[k]
            since += d
            t += d
            rounds += n
    ends = end[~np.isnan(end)]
    makespan = float(ends.max()) if len(ends) else 0.0
    return RoundResult(end, arr, sc, busy, makespan, int(cap.sum()), rounds, solves, switches, np.array(by_type))
