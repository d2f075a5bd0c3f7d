"""Kueue's quota arithmetic: cohorts, flavors, nominal quota, borrowing and lending limits, fair share.

Definitions follow Kueue's ClusterQueue (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/)
for the one resource simulated here (GPUs, `nvidia.com/gpu`), per ResourceFlavor
(a GPU type of the cluster, or `*` for a `gpus:` quota that covers every type):

* a queue's *guaranteed* part of a flavor is `nominal - lendingLimit` (all of the
  nominal quota is lendable when lendingLimit is unset): others never borrow it;
* the cohort's *lendable pool* of a flavor is the sum of its queues' lendable parts;
  what a queue uses above its guaranteed part comes out of that pool;
* a queue may use `max(0, guaranteed - used) + (pool - pool used)`, and at most
  `nominal + borrowingLimit` in all (unlimited when borrowingLimit is unset);
* fair sharing: a queue's share is the GPUs it uses above its nominal quota (all
  flavors) over the cohort's lendable GPUs, divided by its weight (Kueue's dominant
  resource share; with one resource the GPU is the dominant one). Weight 0 makes any
  borrowing infinitely expensive.

Usage is a dict `(queue, flavor) -> GPUs` that the policy copies per pass, so a
tentative admission or preemption is a dict update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.errors import UserError

ANY = "*"            # the flavor of a `gpus:` quota: any GPU type
INF = float("inf")
EPS = 1e-9


@dataclass(frozen=True)
class FlavorQuota:
    nominal: float
    borrow: float       # borrowingLimit (INF: unlimited)
    lend: float         # lendingLimit (the nominal quota when unset)

    @property
    def guaranteed(self) -> float:
        return self.nominal - self.lend


class Quotas:
    """The ClusterQueues of a scenario, grouped in cohorts; `resolve` maps a flavor name to a GPU type."""

    def __init__(self, queues: dict[str, Any], resolve=lambda name: name) -> None:
        self.flavors: dict[str, dict[str, FlavorQuota]] = {}    # queue -> flavor -> quota, in order
        self.cohort: dict[str, str] = {}
        self.weight: dict[str, float] = {}
        self.spec = dict(queues)
        for q, spec in queues.items():
            self.cohort[q] = spec.cohort
            self.weight[q] = spec.fair_sharing.weight if spec.fair_sharing is not None else 1.0
            if spec.flavors is None:
                self.flavors[q] = {ANY: _fq(spec.gpus, spec.borrowing_limit, spec.lending_limit)}
            else:
                self.flavors[q] = {resolve(name): _fq(f.nominal_quota, f.borrowing_limit, f.lending_limit)
                                   for name, f in spec.flavors.items()}
        self.members: dict[str, list[str]] = {}
        for q, c in self.cohort.items():
            self.members.setdefault(c, []).append(q)
        self.pool: dict[tuple[str, str], float] = {}             # (cohort, flavor) -> lendable GPUs
        for q, fl in self.flavors.items():
            for f, fq in fl.items():
                key = (self.cohort[q], f)
                self.pool[key] = self.pool.get(key, 0.0) + fq.lend
        self.lendable = {c: sum(v for (cc, _), v in self.pool.items() if cc == c) for c in self.members}
        self.typed = {c: any(ANY not in self.flavors[q] for q in m) for c, m in self.members.items()}

    def add_queue(self, q: str) -> None:
        """A queue the scenario did not define (a workload names it): no quota of its own, in the
        `default` cohort, unlimited borrowing of every flavor there (jobs only run on borrowed quota)."""
        c = "default"
        fl = {f for (cc, f) in self.pool if cc == c} or {ANY}
        self.flavors[q] = {f: FlavorQuota(0.0, INF, 0.0) for f in sorted(fl)}
        self.cohort[q] = c
        self.weight[q] = 1.0
        self.members.setdefault(c, []).append(q)
        for f in fl:
            self.pool.setdefault((c, f), 0.0)
        self.lendable.setdefault(c, 0.0)
        self.typed.setdefault(c, ANY not in fl)

    def quota(self, q: str, f: str) -> FlavorQuota:
        return self.flavors[q].get(f) or FlavorQuota(0.0, 0.0, 0.0)

    def flavor_of(self, q: str, gpu_type: str) -> str:
        """The flavor a running job of queue q on a GPU of this type counts against."""
        return ANY if ANY in self.flavors[q] else gpu_type

    def pool_used(self, c: str, f: str, usage: dict[tuple[str, str], float]) -> float:
        return sum(max(0.0, usage.get((x, f), 0.0) - self.quota(x, f).guaranteed) for x in self.members[c])

    def available(self, q: str, f: str, usage: dict[tuple[str, str], float]) -> float:
        """GPUs of flavor f that queue q can still be admitted for."""
        fq = self.quota(q, f)
        used = usage.get((q, f), 0.0)
        c = self.cohort[q]
        avail = max(0.0, fq.guaranteed - used) + self.pool.get((c, f), 0.0) - self.pool_used(c, f, usage)
        return max(0.0, min(avail, fq.nominal + fq.borrow - used))

    def ceiling(self, q: str, f: str) -> float:
        """The most of flavor f queue q could ever hold (an empty cohort)."""
        fq = self.quota(q, f)
        return min(fq.nominal + fq.borrow, fq.guaranteed + self.pool.get((self.cohort[q], f), 0.0))

    def borrowing(self, q: str, f: str, usage: dict[tuple[str, str], float], extra: float = 0.0) -> bool:
        return usage.get((q, f), 0.0) + extra > self.quota(q, f).nominal + EPS

    def share(self, q: str, usage: dict[tuple[str, str], float], f: str | None = None,
              extra: float = 0.0) -> float:
        """Fair-sharing share of q (with `extra` GPUs of flavor f admitted): borrowed / lendable / weight."""
        borrowed = 0.0
        for fl, fq in self.flavors[q].items():
            used = usage.get((q, fl), 0.0) + (extra if fl == f else 0.0)
            borrowed += max(0.0, used - fq.nominal)
        if borrowed <= EPS:
            return 0.0
        w = self.weight[q]
        lendable = self.lendable.get(self.cohort[q], 0.0)
        if w <= 0 or lendable <= 0:
            return INF
        return borrowed / lendable / w


def _fq(nominal: int | None, borrow: int | None, lend: int | None) -> FlavorQuota:
    n = float(nominal or 0)
    return FlavorQuota(n, INF if borrow is None else float(borrow), n if lend is None else float(min(lend, n)))


def resolve_flavor(name: str, cluster_types: list[str]) -> str | None:
    """The cluster's GPU type a flavor name stands for (exact, else the catalog's canonical name
    of an alias such as `H100`), or None when the cluster has no such type."""
    if name == ANY or name in cluster_types:
        return name
    from gpucluster.catalog import catalog
    try:
        canon = catalog.gpus.canonical(name)
    except UserError:  # not a catalog name: an openb model such as G2
        return None
    return canon if canon in cluster_types else None
