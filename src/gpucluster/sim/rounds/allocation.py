"""Gavel's allocation policies: X[j, k] = fraction of time job j should run on GPU type k.

Every policy sees a `Problem` (throughputs in steps/s, scale factors, GPUs per type)
and returns X with rows summing to at most 1 and sum_j scale_j X[j, k] <= GPUs of k.

- `max_min_fairness_perf` (Gavel's LAS, heterogeneity-aware): maximise the minimum over
  jobs of scale_j x throughput_j(X) / throughput_j(X_equal), where X_equal gives the job
  an equal time share of every type (so the normalised throughput is 1 under an even
  split). Jobs of the same throughput row and scale get the same allocation (a
  symmetric LP has a symmetric optimum), so the LP has one row per class, not per job.
  A tiny second term (1e-3 of the total normalised throughput) breaks ties towards
  using spare capacity, where Gavel's interior-point solve lands anywhere on the
  optimal face.
- `max_min_fairness` (agnostic LAS): the same with every throughput set to 1, as Gavel
  does; each job's time share is then split across types in proportion to their GPUs
  (the agnostic scheduler has no reason to prefer one).
- `fifo` / `fifo_perf`: arrival order, the head of the queue blocks, X is 1 on one type;
  the agnostic one keeps a job on a random type (seeded) among those with a free GPU,
  `_perf` re-places every job in arrival order on the fastest type with room for it.
  The agnostic FIFO may allocate more GPUs of a type than exist (see `Fifo`).
  `fifo_gavel_code` is the agnostic FIFO as Gavel's code places jobs: the last type in
  name order with a free GPU, not the random one it draws (see `FifoGavelCode`).
- `finish_time_fairness(_perf)` (Themis, as in Gavel): minimise the maximum over jobs of
  rho = (elapsed + remaining / throughput(X)) / (elapsed + remaining / isolated
  throughput), isolated = an equal share of the cluster. rho is quasi-convex in X:
  bisection on rho, each step one LP feasibility check.
- `throughput_per_dollar_perf` (Gavel's cost objective): maximise sum over jobs of
  normalised throughput per dollar of GPU time, prices from the catalog or the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpucluster.sim.rounds import allocators
from gpucluster.sim.rounds.lp import LP_OPTIONS, highs_core, solve_csc, solve_lp

__all__ = ["LP_OPTIONS", "highs_core", "solve_csc", "solve_lp"]   # re-exported: the LP wrapper lives in lp.py

EPS_X = 1e-6          # an allocation below this is zero (LP noise)
TIE_WEIGHT = 1e-3     # weight of the efficiency tie-breaker beside the max-min term


@dataclass
class Problem:
    ids: np.ndarray               # stable job ids (stateful policies key on them), arrival order
    throughput: np.ndarray        # (m, K) steps/s of each job on each type (0: cannot run there)
    scale: np.ndarray             # (m,) GPUs per job
    capacity: np.ndarray          # (K,) GPUs of each type available
    prices: np.ndarray | None = None      # (K,) USD per GPU-hour
    elapsed_s: np.ndarray | None = None   # (m,) seconds since arrival (finish-time fairness)
    remaining: np.ndarray | None = None   # (m,) steps left
    options: dict = field(default_factory=dict)

    def feasible(self) -> np.ndarray:
        return (self.throughput > 0) & (self.scale[:, None] <= self.capacity[None, :])


LP_MEMO_SIZE = 4096   # LP solutions an allocator remembers (see max_min)


def row_classes(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique rows of `key`, in order of first appearance: representatives, inverse, counts.
    Rows are equal when their bytes are: a dict over slices of one bytes object (~0.3 us a
    row; np.unique on a void view costs ~100 us here)."""
    key = np.ascontiguousarray(key)
    width = key.shape[1] * key.itemsize
    buf = key.tobytes()
    index: dict[bytes, int] = {}
    first: list[int] = []
    inverse: list[int] = []
    for i in range(len(key)):
        u = index.setdefault(buf[i * width:(i + 1) * width], len(first))
        if u == len(first):
            first.append(i)
        inverse.append(u)
    inv = np.array(inverse, dtype=np.int64)
    return np.array(first, dtype=np.int64), inv, np.bincount(inv)


def _classes(c: np.ndarray, scale: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (coefficient row, scale, feasibility) classes: representatives, inverse, counts."""
    rep, inv, counts = row_classes(np.concatenate([c, scale[:, None].astype(float), ok.astype(float)], axis=1))
    return rep, inv, counts.astype(float)


def _base_lp(u: int, K: int, scale: np.ndarray, counts: np.ndarray, capacity: np.ndarray, ok: np.ndarray,
             extra_cols: int = 0):
    """Rows sum <= 1 and per-type capacity over x (u*K, row-major) [+ extra columns], dense:
    these LPs have tens of classes, where scipy's sparse assembly costs more than the solve."""
    A = np.zeros((u + K, u * K + extra_cols))
    r = np.arange(u)
    for k in range(K):
        A[r, r * K + k] = 1.0
        A[u + k, r * K + k] = counts * scale
    b = np.concatenate([np.ones(u), capacity.astype(float)])
    bounds = np.zeros((u * K + extra_cols, 2))
    bounds[:u * K, 1] = np.where(ok.ravel(), 1.0, 0.0)
    bounds[u * K:, 1] = np.inf
    return A, b, bounds


def max_min(c: np.ndarray, scale: np.ndarray, capacity: np.ndarray, ok: np.ndarray,
            memo: dict[tuple, np.ndarray] | None = None) -> np.ndarray:
    """max t s.t. sum_k c[j,k] x[j,k] >= t for every job with a feasible type, + a tie-breaker.
    `memo` (the caller's, e.g. one per run) remembers the solutions of LPs already solved."""
    m, K = c.shape
    live = ok.any(axis=1)
    everyone = bool(live.all())
    if not everyone and not live.any():
        return np.zeros((m, K))
    cl, sl, okl = (c, scale, ok) if everyone else (c[live], scale[live], ok[live])
    rep, inv, counts = _classes(cl, sl, okl)
    cu, su, oku = cl[rep], sl[rep], okl[rep]
    u = len(rep)
    # the same classes, counts and GPUs recur (a job leaves, one of its class arrives): the LP is
    # then the same, bit for bit, and so is HiGHS's answer; remembered rather than solved again
    key = (u, K, TIE_WEIGHT, cu.tobytes(), su.tobytes(), counts.tobytes(), np.asarray(capacity).tobytes(), oku.tobytes())
    Xu = memo.get(key) if memo is not None else None
    if Xu is None:
        x = solve_csc(*_max_min_lp(cu, su, counts, capacity, oku))
        if x is None:
            raise RuntimeError("max-min LP not solved to optimality")   # a bug: the LP is always feasible (X = 0)
        Xu = _clean(x[:-1].reshape(u, K), own=True)   # row by row: the same per class as per job
        if memo is not None:
            if len(memo) >= LP_MEMO_SIZE:
                memo.clear()
            memo[key] = Xu
    if everyone:
        return Xu[inv]
    X = np.zeros((m, K))
    X[live] = Xu[inv]
    return X


def _max_min_lp(cu: np.ndarray, su: np.ndarray, counts: np.ndarray, capacity: np.ndarray, oku: np.ndarray):
    """The max-min LP over classes, column-wise: x (u*K, row-major) then t. Rows: sum_k x <= 1
    (u), per-type capacity (K), t - sum_k c x <= 0 (u). The same nonzeros, in the same order, as
    `_base_lp` + the fairness rows through `solve_lp` (a test), without the dense matrix."""
    u, K = cu.shape
    n = u * K
    total = float(counts.sum())
    cost = np.empty(n + 1)
    cost[:n] = -TIE_WEIGHT * (counts[:, None] * cu).ravel() / total
    cost[n] = -1.0
    upper = np.empty(n + 1)
    upper[:n] = oku.ravel()
    upper[n] = np.inf
    row_upper = np.zeros(u + K + u)
    row_upper[:u] = 1.0
    row_upper[u:u + K] = capacity
    start, index = _max_min_pattern(u, K)
    # each x column: 1.0 in its class row, counts x scale in its type's row, -c in its fairness row
    value = np.empty(3 * n + u)
    value[0:3 * n:3] = 1.0
    value[1:3 * n:3] = np.repeat(counts * su, K)
    value[2:3 * n:3] = -cu.ravel()
    value[3 * n:] = 1.0                               # t: 1.0 in every fairness row
    if not np.all(value[2:3 * n:3]):                  # an infeasible type: c = 0, no entry (as a dense matrix gives)
        keep = value != 0
        value, index = value[keep], index[keep]
        per_col = keep[:3 * n].reshape(n, 3).sum(axis=1)
        start = np.zeros(n + 2, dtype=np.int32)
        np.cumsum(per_col, out=start[1:n + 1])
        start[-1] = start[-2] + u
    return cost, start, index, value, np.zeros(n + 1), upper, row_upper


_PATTERNS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _max_min_pattern(u: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Column starts and row indices of the max-min LP with every c nonzero (by shape; read-only)."""
    got = _PATTERNS.get((u, K))
    if got is None:
        n = u * K
        r = np.arange(u)
        rows = np.empty((u, K, 3), dtype=np.int32)
        rows[:, :, 0] = r[:, None]
        rows[:, :, 1] = u + np.arange(K)[None, :]
        rows[:, :, 2] = (u + K + r)[:, None]
        start = np.concatenate([np.arange(0, 3 * n + 1, 3), [3 * n + u]]).astype(np.int32)
        index = np.concatenate([rows.ravel(), u + K + r]).astype(np.int32)
        start.flags.writeable = False
        index.flags.writeable = False
        got = _PATTERNS[(u, K)] = (start, index)
    return got


def _clean(X: np.ndarray, own: bool = False) -> np.ndarray:
    """X within [0, 1], entries below EPS_X zeroed, rows scaled to sum <= 1. `own`: X may be
    overwritten (a fresh solver copy): no copy then; clip(X, 0, 1) is min(max(X, 0), 1), bit for bit,
    without np.clip's Python wrapper (a few us a solve)."""
    X = np.maximum(X, 0.0, out=X if own else None)
    np.minimum(X, 1.0, out=X)
    X[X < EPS_X] = 0.0
    over = X.sum(axis=1)
    if over.max(initial=0.0) > 1:
        X[over > 1] /= over[over > 1, None]
    return X


def equal_share_throughput(T: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each job's throughput when it spends time on every type in proportion to its GPUs."""
    w = capacity / max(1.0, float(capacity.sum()))
    return (T * w[None, :]).sum(axis=1)


class Allocator:
    """A stateless policy unless it says otherwise; `reset` forgets state between runs."""
    name = ""
    agnostic = False

    def __init__(self, options: dict | None = None, seed: int = 0) -> None:
        self.options = dict(options or {})
        self.seed = seed
        self.memo: dict[tuple, np.ndarray] = {}   # LP inputs -> solution, this allocator's (max_min)

    def rates(self, p: Problem) -> np.ndarray:
        """Throughputs the policy believes in: all 1 where feasible when agnostic."""
        ok = p.feasible()
        return ok.astype(float) if self.agnostic else np.where(ok, p.throughput, 0.0)

    def allocate(self, p: Problem) -> np.ndarray:
        raise NotImplementedError


@allocators.register("max_min_fairness_perf", "las_perf", "gavel")
class MaxMinFairnessPerf(Allocator):
    name = "max_min_fairness_perf"

    def allocate(self, p: Problem) -> np.ndarray:
        T = self.rates(p)
        ok = T > 0
        eq = equal_share_throughput(T, p.capacity)
        c = np.where(ok, p.scale[:, None] * T / np.maximum(eq, 1e-300)[:, None], 0.0)
        return max_min(c, p.scale, p.capacity, ok, self.memo)


@allocators.register("max_min_fairness", "las")
class MaxMinFairness(MaxMinFairnessPerf):
    name = "max_min_fairness"
    agnostic = True

    def allocate(self, p: Problem) -> np.ndarray:
        X = super().allocate(p)
        ok = p.feasible()
        # re-split each job's share over its feasible types by their GPU counts
        w = ok * p.capacity[None, :].astype(float)
        share = X.sum(axis=1, keepdims=True) * w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
        used = (p.scale[:, None] * share).sum(axis=0)
        return share if np.all(used <= p.capacity + 1e-6) else X


@allocators.register("fifo_perf")
class FifoPerf(Allocator):
    """Arrival order, the head of the queue blocks. As Gavel's FIFO_Perf: recomputed from
    scratch at every allocation (the oldest jobs move to the fastest types as they free
    up), each job taking the fastest type that holds its gang now."""
    name = "fifo_perf"
    sticky = False

    def __init__(self, options: dict | None = None, seed: int = 0) -> None:
        super().__init__(options, seed)
        self.placed: dict[int, int] = {}
        self.rng = np.random.default_rng(seed)

    # Python lists: a job's K types are a handful, where numpy's per-call cost would dominate
    def candidates(self, ok_row: list[bool], avail: list[float], scale: int) -> list[int]:
        return [k for k, a in enumerate(avail) if ok_row[k] and a >= scale]

    def choose(self, T_row: list[float], cands: list[int]) -> int:
        return max(cands, key=T_row.__getitem__)     # the first of the fastest, as argmax

    def allocate(self, p: Problem) -> np.ndarray:
        m, K = p.throughput.shape
        X = np.zeros((m, K))
        ok = p.feasible().tolist()
        T = p.throughput.tolist()
        scale = p.scale.tolist()
        ids = p.ids.tolist()
        avail = [float(c) for c in p.capacity.tolist()]
        live = set(ids)
        self.placed = {i: k for i, k in self.placed.items() if i in live} if self.sticky else {}
        waiting = []
        for j, i in enumerate(ids):
            k = self.placed.get(i)
            if k is None:
                waiting.append(j)
            else:
                X[j, k] = 1.0
                avail[k] -= scale[j]
        for j in waiting:   # arrival order; the first that finds no room blocks the rest
            cands = self.candidates(ok[j], avail, int(scale[j]))
            if not cands:
                break
            k = self.choose(T[j], cands)
            self.placed[ids[j]] = k
            X[j, k] = 1.0
            avail[k] -= scale[j]
        return X


@allocators.register("fifo")
class Fifo(FifoPerf):
    """As Gavel's agnostic FIFO: a job keeps the type it was given; a new one gets a random
    type (seeded) among those with at least one GPU not yet allocated, so a gang may be
    allocated a type it does not fit on yet and waits there (the mechanism never runs
    more than fits). This reading reproduces Gavel's figures (docs/simulator.md); requiring
    room for the whole gang, as FIFO_Perf does, gives 1.4x Gavel's mean JCT on 2869ce."""
    name = "fifo"
    agnostic = True
    sticky = True

    def candidates(self, ok_row: list[bool], avail: list[float], scale: int) -> list[int]:
        return [k for k, a in enumerate(avail) if ok_row[k] and a > 0]

    def choose(self, T_row: list[float], cands: list[int]) -> int:
        return int(self.rng.choice(cands))


@allocators.register("fifo_gavel_code", "gavel_fifo_code")
class FifoGavelCode(Fifo):
    """Gavel's agnostic FIFO as its code runs (scheduler/policies/fifo.py, mode 'base'), in
    two steps each time the allocation is recomputed:

    1. Completed jobs, visited in job-id (arrival) order among the allocated ones: the head
       of the queue takes the completed job's type if its gang fits and it runs there. The
       count of free GPUs it is checked against has only subtracted the still-running jobs
       visited so far (Gavel: "we cannot decrement num_workers here"), so a gang can be
       placed on a type it does not fit yet and wait there for the jobs after it.
    2. The queue in arrival order over the types (sorted by name) with a GPU not yet
       allocated: each job goes to the *last* of them that holds its whole gang (the policy
       draws a random type, but the loop after the draw leaves the job on the last one:
       k80 < p100 < v100, a V100 while one has room); the first job that fits nowhere stops
       the pass.

    Its figures do not move with the seed. `type_names` (the columns' GPU names) sets the
    order; without them the last column counts as last. Step 1 and the room for the whole
    gang are what bring Gavel's published FIFO figures within 5% on both public traces
    (docs/simulator.md); without them (each job on the last type with a free GPU) 2869ce
    reads 0.88 of Gavel's mean JCT."""
    name = "fifo_gavel_code"
    type_names: list[str] | None = None

    def __init__(self, options: dict | None = None, seed: int = 0) -> None:
        super().__init__(options, seed)
        self.rank: dict[int, int] = {}     # job id -> order first seen (arrival order)
        self.seen = 0

    def by_name(self, K: int) -> list[int]:
        names = self.type_names
        if names is None or len(names) != K:
            return list(range(K))
        return sorted(range(K), key=lambda k: names[k].lower())

    def allocate(self, p: Problem) -> np.ndarray:
        m, K = p.throughput.shape
        X = np.zeros((m, K))
        ok = p.feasible().tolist()
        scale = p.scale.tolist()
        ids = p.ids.tolist()
        pos = {i: j for j, i in enumerate(ids)}
        for i in ids:
            if i not in self.rank:
                self.rank[i] = self.seen
                self.seen += 1
        avail = [float(c) for c in p.capacity.tolist()]
        queue = [j for j, i in enumerate(ids) if i not in self.placed]   # arrival order
        head = 0
        # 1. completed jobs hand their type to the head of the queue (free GPUs counted so far)
        for i in sorted(self.placed, key=self.rank.__getitem__):
            k = self.placed[i]
            j = pos.get(i)
            if j is not None:
                avail[k] -= scale[j]
                continue
            del self.placed[i]
            del self.rank[i]
            if head < len(queue):
                h = queue[head]
                if scale[h] <= avail[k] and ok[h][k]:
                    self.placed[ids[h]] = k
                    avail[k] -= scale[h]
                    head += 1
        # 2. the rest of the queue: the last type by name with room for the gang
        types = [k for k in self.by_name(K) if avail[k] > 0]
        for h in queue[head:]:
            if not types:
                break
            fits = [k for k in types if avail[k] >= scale[h] and ok[h][k]]
            if not fits:
                break
            k = fits[-1]
            self.placed[ids[h]] = k
            avail[k] -= scale[h]
            if avail[k] <= 0:
                types.remove(k)
        for i, k in self.placed.items():
            X[pos[i], k] = 1.0
        return X


@allocators.register("finish_time_fairness_perf", "themis_perf")
class FinishTimeFairnessPerf(Allocator):
    name = "finish_time_fairness_perf"

    def allocate(self, p: Problem) -> np.ndarray:
        T = self.rates(p)
        ok = T > 0
        m, K = T.shape
        X = np.zeros((m, K))
        live = ok.any(axis=1)
        if not live.any():
            return X
        T, ok, s = T[live], ok[live], p.scale[live]
        n = int(live.sum())
        elapsed = (p.elapsed_s[live] if p.elapsed_s is not None else np.zeros(n)).astype(float)
        rem = (p.remaining[live] if p.remaining is not None else np.ones(n)).astype(float)
        rem = np.where(np.isfinite(rem), rem, 0.0)   # a service replica has no finish time: no claim on rho
        if self.agnostic:   # remaining work in the same unit as the all-ones throughputs
            rem = rem / np.maximum(p.throughput[live].max(axis=1), 1e-300)
        share = min(1.0, float(p.capacity.sum()) / max(1.0, float(s.sum())))
        iso = equal_share_throughput(T, p.capacity) * share
        denom = np.maximum(elapsed + rem / iso, 1e-9)   # a replica just started: no claim, no 0/0
        A0, b0, bounds = _base_lp(n, K, s, np.ones(n), p.capacity, ok)
        tp = np.zeros((n, n * K))
        for k in range(K):
            tp[np.arange(n), np.arange(n) * K + k] = -T[:, k]
        A = np.vstack([A0, tp])
        cost = -(T / np.maximum(iso, 1e-300)[:, None]).ravel() * TIE_WEIGHT

        def solve(rho: float):
            slack = rho * denom - elapsed
            if np.any(slack <= 0):
                return None
            need = rem / slack                      # throughput each job needs to finish by rho
            return solve_lp(cost, A, np.concatenate([b0, -need]), bounds)

        lo = float(np.max(elapsed / denom))
        hi, x = max(1.0, 2 * lo), None
        for _ in range(40):
            x = solve(hi)
            if x is not None:
                break
            lo, hi = hi, hi * 2
        if x is None:   # even a huge rho is infeasible: only a job with no capacity left; give it nothing
            return X
        for _ in range(int(self.options.get("bisections", 12))):
            mid = 0.5 * (lo + hi)
            got = solve(mid)
            if got is None:
                lo = mid
            else:
                hi, x = mid, got
        X[live] = x.reshape(n, K)
        return _clean(X)


@allocators.register("finish_time_fairness", "themis")
class FinishTimeFairness(FinishTimeFairnessPerf):
    name = "finish_time_fairness"
    agnostic = True


@allocators.register("throughput_per_dollar_perf", "max_sum_throughput_normalized_by_cost_perf", "cost")
class ThroughputPerDollar(Allocator):
    name = "throughput_per_dollar_perf"

    def allocate(self, p: Problem) -> np.ndarray:
        T = self.rates(p)
        ok = T > 0
        m, K = T.shape
        X = np.zeros((m, K))
        live = ok.any(axis=1)
        if not live.any():
            return X
        prices = p.prices if p.prices is not None else np.ones(K)
        prices = np.where(prices > 0, prices, 1.0)
        eq = equal_share_throughput(T, p.capacity)
        value = np.where(ok, T / np.maximum(eq, 1e-300)[:, None] / prices[None, :], 0.0)
        rep, inv, counts = _classes(value[live], p.scale[live], ok[live])
        vu, su, oku = value[live][rep], p.scale[live][rep], ok[live][rep]
        A, b, bounds = _base_lp(len(rep), K, su, counts, p.capacity, oku)
        # earlier arrivals first among equals: a tiny bonus decreasing with the class's first job
        order = 1.0 - np.argsort(np.argsort(rep)) / max(1, len(rep)) * 1e-6
        cost = -(counts[:, None] * vu * order[:, None]).ravel()
        x = solve_lp(cost, A, b, bounds)
        if x is None:
            raise RuntimeError("cost LP not solved to optimality")
        X[live] = x.reshape(len(rep), K)[inv]
        return _clean(X)
