"""Space sharing: Gavel's `max_min_fairness_packed` (OSDI'20 §3.2, MaxMinFairnessPolicyWithPacking).

The allocation is over job *combinations*: a job alone, or two jobs of the same scale
factor sharing the same GPU(s). X[c, k] is the fraction of time combination c should run
on type k, with
- each job's time over every combination holding it and every type <= 1,
- per type, sum_c scale_c X[c, k] <= GPUs of k (a pair holds its scale GPUs once),
- a job's effective throughput = sum over its combinations of X[c, k] x its throughput
  in c on k (the packed figure in a pair, its own alone),
and the objective is max_min_fairness_perf's: the minimum over jobs of scale x effective
throughput / throughput under an even split of every type (alone figures), plus the same
1e-3 tie-breaker towards total normalised throughput.

Keeping the LP small:
- Classes. Jobs with the same kind (job type and scale: the same alone and packed
  figures) are interchangeable, so the LP is symmetric under permuting a class; it is
  convex, hence it has a symmetric optimum, whose variables are per class pair. The LP
  here is over totals: S[C, k] = time of C's jobs alone on k, summed over the class;
  Y[{C, D}, k] = time of C-D pairs on k, summed over the pairs. A job of C then has
  time (sum_k S + sum Y, a self pair counted twice) / n_C: exact, not a relaxation.
- Pruning. A pair on type k whose two jobs reach fractions a and b of their alone
  throughputs there with a + b <= 1 is never needed: running a alone for a x its time
  and b alone for b x its time gives both jobs the same throughput with no more GPU
  time and no more job time. Dropping those columns leaves the optimum unchanged
  (objective and tie-breaker both). Pairs where one job cannot run alone on k are not
  formed (a job never runs on a type it cannot use).
- Back to jobs. The class solution is spread over few job pairs, each job getting its
  class's share exactly: a bipartite transport (north-west corner: n_C + n_D - 1 pairs)
  between two classes, disjoint pairs (plus one triangle when n_C is odd) inside a class.
  Per job and type, time and throughput equal the symmetric solution's, so this is an
  optimum of Gavel's job-level LP too; Gavel's interior-point solver lands on a spread
  one over all pairs instead, which the round mechanism would have to sort each round.

Two jobs of the same type: Gavel's 2019 table measured the two copies (their figures differ
by 0.6% at the median, up to 26% for P100 LM batch 40); each job here runs at their mean, which keeps
a class symmetric (Gavel gives the first job of the pair the first figure).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpucluster.sim.rounds import allocators
from gpucluster.sim.rounds.allocation import (EPS_X, TIE_WEIGHT, Allocator, MaxMinFairnessPerf, Problem, row_classes,
                                              equal_share_throughput, solve_lp)

USEFUL_EPS = 1e-9     # a + b must exceed 1 by this for a pair to be worth a column


@dataclass
class PackedProblem(Problem):
    """A Problem plus what packing needs: each job's kind and the packed figures per kind pair."""
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))   # (m,) index into pair_rate
    # (K, kinds, kinds): steps/s of a job of kind a sharing a GPU of type k with one of kind b (0: not packable)
    pair_rate: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    # (m,) steps/s per unit of `throughput` for each job (the engine passes speeds relative to
    # each job's fastest type, as engine.py does): packed rate in those units = pair_rate / unit
    unit: np.ndarray | None = None


@dataclass
class Combos:
    """A combination allocation: rows are a job alone (b = -1) or a pair (a, b)."""
    a: np.ndarray        # (c,) job index into the Problem
    b: np.ndarray        # (c,) second job, -1 when alone
    X: np.ndarray        # (c, K) fraction of time on each type
    rate_a: np.ndarray   # (c, K) a's throughput in this combination, in the Problem's units
    rate_b: np.ndarray   # (c, K) b's (0 when alone)
    value: float = 0.0   # the LP's max-min value (minimum normalised throughput)
    mean: float = 0.0    # mean normalised throughput (the LP maximises value + TIE_WEIGHT x mean)

    def job_time(self, m: int) -> np.ndarray:
        """(m, K) time each job is allocated on each type, over all its combinations."""
        K = self.X.shape[1]
        out = np.zeros((m, K))
        np.add.at(out, self.a, self.X)
        pair = self.b >= 0
        np.add.at(out, self.b[pair], self.X[pair])
        return out

    def job_throughput(self, m: int) -> np.ndarray:
        """(m,) effective throughput of each job (Problem units)."""
        out = np.zeros(m)
        np.add.at(out, self.a, (self.X * self.rate_a).sum(axis=1))
        pair = self.b >= 0
        np.add.at(out, self.b[pair], (self.X[pair] * self.rate_b[pair]).sum(axis=1))
        return out


def singles(X: np.ndarray, T: np.ndarray) -> Combos:
    """An unpacked allocation (m, K) as combinations: one row per job, in job order."""
    m, K = X.shape
    return Combos(np.arange(m), np.full(m, -1), X.copy(), np.where(X > 0, T, 0.0), np.zeros((m, K)))


def _relative_pair_rates(p: PackedProblem) -> np.ndarray:
    """(m, kinds, K): job j's packed rate with a job of each kind on each type, in p's units."""
    unit = p.unit if p.unit is not None else np.ones(len(p.scale))
    R = p.pair_rate[:, p.kind, :]                   # (K, m, kinds)
    return np.transpose(R, (1, 2, 0)) / np.maximum(unit, 1e-300)[:, None, None]


def packed_max_min(p: PackedProblem, prune: bool = True) -> Combos:
    """Solve Gavel's packed max-min LP over classes and spread it over job combinations.

    `prune=False` keeps every packable pair column (the tests' check that pruning does not
    change the optimum)."""
    m, K = p.throughput.shape
    ok = p.feasible()
    T = np.where(ok, p.throughput, 0.0)
    eq = equal_share_throughput(T, p.capacity)
    c = np.where(ok, p.scale[:, None] * T / np.maximum(eq, 1e-300)[:, None], 0.0)
    live = np.flatnonzero(ok.any(axis=1))
    if len(live) == 0:
        return singles(np.zeros((m, K)), T)
    unit = p.unit if p.unit is not None else np.ones(m)
    # a class: same kind, scale, feasibility, normalised row and equal-share throughput in
    # steps/s (what the packed coefficients depend on)
    key = np.concatenate([c[live], ok[live].astype(float), p.scale[live, None].astype(float),
                          p.kind[live, None].astype(float), (unit * eq)[live, None]], axis=1)
    rep, inv, counts = row_classes(key)
    u = len(rep)
    R = _relative_pair_rates(p)[live[rep]][:, p.kind[live[rep]], :]    # (u, u, K): C's rate beside D on k
    Tu, cu, oku, su = T[live[rep]], c[live[rep]], ok[live[rep]], p.scale[live[rep]]
    equ = eq[live[rep]]
    n = counts.astype(float)
    # candidate pair columns (C <= D, k)
    Ci, Di = np.triu_indices(u)
    cand = (su[Ci] == su[Di]) & ((Ci != Di) | (counts[Ci] >= 2))
    cols = []
    for k in range(K):
        both = cand & oku[Ci, k] & oku[Di, k]
        rc, rd = R[Ci, Di, k], R[Di, Ci, k]
        if prune:
            with np.errstate(divide="ignore", invalid="ignore"):
                gain = rc / Tu[Ci, k] + rd / Tu[Di, k]
            both &= gain > 1 + USEFUL_EPS
        else:
            both &= (rc > 0) | (rd > 0)
        sel = np.flatnonzero(both)
        cols.append(np.stack([Ci[sel], Di[sel], np.full(len(sel), k)], axis=1))
    pc = np.concatenate(cols) if cols else np.zeros((0, 3), dtype=np.int64)
    if len(pc) == 0:      # nothing worth packing: the unpacked LP, solved as max_min_fairness_perf does
        X = MaxMinFairnessPerf().allocate(p)
        out = singles(X, T)
        out.value, out.mean = _value(out, c, T, live, m)
        return out
    P = len(pc)
    pC, pD, pk = pc[:, 0], pc[:, 1], pc[:, 2]
    # normalised throughput per job of C (resp. D) per unit of pair time, in C's coefficients
    cpC = su[pC] * R[pC, pD, pk] / np.maximum(equ[pC], 1e-300)
    cpD = su[pD] * R[pD, pC, pk] / np.maximum(equ[pD], 1e-300)
    nS = u * K
    ncol = nS + P + 1
    A = np.zeros((2 * u + K, ncol))
    r = np.arange(u)
    pcol = nS + np.arange(P)
    for k in range(K):
        A[r, r * K + k] = 1.0                         # job time of C (totals)
        A[u + k, r * K + k] = su                      # GPUs of k
        A[u + K + r, r * K + k] = -cu[:, k]           # fairness: n_C t - throughput of C <= 0
    np.add.at(A, (pC, pcol), 1.0)
    np.add.at(A, (pD, pcol), 1.0)                     # a self pair: twice
    A[u + pk, pcol] = su[pC]
    np.add.at(A, (u + K + pC, pcol), -cpC)
    np.add.at(A, (u + K + pD, pcol), -cpD)
    A[u + K + r, -1] = n
    b = np.concatenate([n, p.capacity.astype(float), np.zeros(u)])
    bounds = np.zeros((ncol, 2))
    bounds[:nS, 1] = np.where(oku, n[:, None], 0.0).ravel()
    bounds[nS:, 1] = np.inf
    total = float(n.sum())
    cost = np.concatenate([-TIE_WEIGHT * cu.ravel() / total, -TIE_WEIGHT * (cpC + cpD) / total, [-1.0]])
    x = solve_lp(cost, A, b, bounds)
    if x is None:
        raise RuntimeError("packed max-min LP not solved to optimality")   # a bug: X = 0 is feasible
    S = x[:nS].reshape(u, K)
    Y = x[nS:nS + P]
    out = _spread(S, Y, pc, R, T, inv, counts, live, m)
    out.value, out.mean = _value(out, c, T, live, m)
    return out


def _value(cm: Combos, c: np.ndarray, T: np.ndarray, live: np.ndarray, m: int) -> tuple[float, float]:
    """Minimum and mean over jobs with a feasible type of their normalised effective throughput."""
    norm = np.where(T > 0, c / np.where(T > 0, T, 1.0), 0.0).max(axis=1)   # scale / eq, per job
    got = (cm.job_throughput(m) * norm)[live]
    return float(got.min()), float(got.mean())


def _spread(S: np.ndarray, Y: np.ndarray, pc: np.ndarray, R: np.ndarray, T: np.ndarray, inv: np.ndarray,
            counts: np.ndarray, live: np.ndarray, m: int) -> Combos:
    """Class totals -> job combinations, each job getting exactly its class's share."""
    K = T.shape[1]
    # alone: S / n_C for each job of a class with some time alone, one row per job, job order
    alone = S.max(axis=1) > EPS_X / 10
    js = live[alone[inv]]
    cls = inv[alone[inv]]
    a_parts = [js]
    b_parts = [np.full(len(js), -1, dtype=np.int64)]
    x_parts = [S[cls] / counts[cls, None]]
    ra_parts = [T[js]]
    rb_parts = [np.zeros((len(js), K))]
    by_pair: dict[tuple[int, int], np.ndarray] = {}
    for (C, D, k), y in zip(pc.tolist(), Y.tolist(), strict=True):
        if y > EPS_X / 10:
            by_pair.setdefault((C, D), np.zeros(K))[k] += y
    if by_pair:
        members = [live[np.flatnonzero(inv == C)] for C in range(len(counts))]
        for (C, D), yv in by_pair.items():
            pairs = _pairs(members[C], members[D], C == D)
            w = np.array([x[2] for x in pairs])
            a_parts.append(np.array([x[0] for x in pairs], dtype=np.int64))
            b_parts.append(np.array([x[1] for x in pairs], dtype=np.int64))
            x_parts.append(w[:, None] * yv[None, :])
            ra_parts.append(np.broadcast_to(R[C, D], (len(w), K)))
            rb_parts.append(np.broadcast_to(R[D, C], (len(w), K)))
    cm = Combos(np.concatenate(a_parts), np.concatenate(b_parts), np.concatenate(x_parts),
                np.concatenate(ra_parts), np.concatenate(rb_parts))
    cm.X = np.clip(cm.X, 0.0, 1.0)
    cm.X[cm.X < EPS_X] = 0.0
    tot = cm.job_time(m).sum(axis=1)              # LP noise must not give a job more than all its time
    if np.any(tot > 1):
        f = np.maximum(tot[cm.a], np.where(cm.b >= 0, tot[np.maximum(cm.b, 0)], 0.0))
        cm.X[f > 1] /= f[f > 1, None]
    keep = cm.X.sum(axis=1) > 0
    cm = Combos(cm.a[keep], cm.b[keep], cm.X[keep], cm.rate_a[keep], cm.rate_b[keep])
    cm.rate_a[cm.X == 0] = 0.0
    cm.rate_b[cm.X == 0] = 0.0
    return cm


def _pairs(ci: np.ndarray, di: np.ndarray, same: bool) -> list[tuple[int, int, float]]:
    """(job, job, weight) with sum of weights over each job's pairs = its class's share of the
    class-pair total: 1/n_C for C-D pairs (1/n_D on D's side), 2/n_C inside one class."""
    out: list[tuple[int, int, float]] = []
    if same:
        n = len(ci)
        js = ci.tolist()
        even = n if n % 2 == 0 else n - 3
        out += [(js[i], js[i + 1], 2.0 / n) for i in range(0, even, 2)]
        if n % 2:   # a triangle: each of its jobs in two pairs of 1/n
            x, y, z = js[-3:]
            out += [(x, y, 1.0 / n), (y, z, 1.0 / n), (x, z, 1.0 / n)]
        return out
    nc, nd = len(ci), len(di)
    # north-west corner: C's jobs supply nd units each, D's demand nc units each; a unit is
    # 1 / (nc nd) of the total
    i = j = 0
    sup, dem = nd, nc
    while i < nc and j < nd:
        q = min(sup, dem)
        out.append((int(ci[i]), int(di[j]), q / (nc * nd)))
        sup -= q
        dem -= q
        if sup == 0:
            i, sup = i + 1, nd
        if dem == 0:
            j, dem = j + 1, nc
    return out


@allocators.register("max_min_fairness_packed", "las_packed", "gavel_packed")
class MaxMinFairnessPacked(Allocator):
    """Gavel's max_min_fairness_packed. `combos` is the allocation the packed round engine
    runs; `allocate` gives each job's total time per type (its rows sum to <= 1). Given a
    plain Problem (no packed figures) it is max_min_fairness_perf: with no pairs the
    packed LP is the unpacked one."""
    name = "max_min_fairness_packed"

    def combos(self, p: Problem) -> Combos:
        if not isinstance(p, PackedProblem) or p.pair_rate.size == 0:
            ok = p.feasible()
            return singles(MaxMinFairnessPerf(self.options, self.seed).allocate(p), np.where(ok, p.throughput, 0.0))
        return packed_max_min(p, prune=bool(self.options.get("prune", True)))

    def allocate(self, p: Problem) -> np.ndarray:
        return self.combos(p).job_time(len(p.scale))
