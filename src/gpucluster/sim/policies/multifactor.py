"""Slurm's priority/multifactor plugin (https://slurm.schedmd.com/priority_multifactor.html),
scheduled by sched/backfill as Slurm does (or strictly in priority order, sched/builtin).

    priority = PriorityWeightAge       * age factor
             + PriorityWeightFairshare * fair-share factor
             + PriorityWeightJobSize   * job size factor
             + PriorityWeightPartition * partition factor
             + PriorityWeightQOS       * QOS factor

truncated to an integer, at least 1 (0 is Slurm's held job); ties go to the earlier job.
Every factor is in [0, 1]:
- age: time eligible / PriorityMaxAge, capped at 1;
- fair-share: classic 2^(-U/S) per account, usage decayed by PriorityDecayHalfLife
  (fairshare.py); jobs without an account count under their queue's name;
- job size: Slurm's (nodes / cluster nodes + CPUs / cluster CPUs) / 2 with GPUs in place of
  CPUs (the cluster's scarce resource here); 1 minus that with PriorityFavorSmall;
- partition: the partition's PriorityJobFactor / the largest one (`partition_priority`;
  Slurm's default 1 everywhere gives 1);
- QOS: the QOS's Priority / the largest one (`qos_priority`; Slurm's default 0 gives 0).

Slurm's defaults are used for everything not given, and Slurm's default weights are all 0
(priority/multifactor then orders as FIFO): copy the Priority* lines of your slurm.conf
(`scontrol show config | grep ^Priority`). Times take Slurm's forms ("7-0", "14-0",
"5"): a bare number is minutes, as in slurm.conf. Priorities are recomputed every
PriorityCalcPeriod (default 5 minutes), new jobs get theirs when they arrive, as in Slurm.
Jobs of a partition with a higher PriorityTier (`queues.<partition>.priority_tier`) come before
any job of a lower tier whatever their priorities, as Slurm sorts its queue (tier, then priority);
PriorityJobFactor is the weighted partition factor above. Without backfill (sched/builtin) a job
that cannot start blocks the later jobs whose partitions share a node with its own (without node
sets: every later job). Left out: site, association, nice and TRES factors, Fair Tree.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from gpucluster.errors import UserError
from gpucluster.sim.jobs import PENDING, Job
from gpucluster.sim.policies import policies
from gpucluster.sim.policies.backfill import EasyBackfill
from gpucluster.sim.placement import Scratch
from gpucluster.sim.policies.base import Decision, Start, View
from gpucluster.sim.policies.fairshare import FairShare

WEIGHTS = ("PriorityWeightAge", "PriorityWeightFairshare", "PriorityWeightJobSize", "PriorityWeightPartition",
           "PriorityWeightQOS")
# Slurm's defaults (slurm.conf(5)): weights 0, PriorityMaxAge 7-0, PriorityDecayHalfLife 7-0,
# PriorityCalcPeriod 5 minutes, PriorityFavorSmall NO
DEFAULT_TIMES_S = {"PriorityMaxAge": 7 * 86400.0, "PriorityDecayHalfLife": 7 * 86400.0,
                   "PriorityCalcPeriod": 300.0}


def slurm_time_s(value: Any, name: str) -> float:
    """A slurm.conf time ("7-0", "1-12:00:00", "30:00", 5 = minutes) in seconds."""
    from gpucluster.sim.traces.sacct import parse_time_limit
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError(f"{name} is {value!r}: give a Slurm time (7-0, 1-12:00:00) or minutes",
                        field=f"policy_options.{name}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise UserError(f"{name} is {value!r}: minutes must be >= 0", field=f"policy_options.{name}")
        return float(value) * 60
    try:
        got = parse_time_limit(value)
    except ValueError:
        got = None
    if got is None:
        raise UserError(f"{name} is {value!r}: give a Slurm time (7-0, 1-12:00:00) or minutes",
                        field=f"policy_options.{name}")
    return float(got)


def _number_map(value: Any, name: str) -> dict[str, float]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            and math.isfinite(v) for k, v in value.items()):
        raise UserError(f"{name} must map names to numbers >= 0", field=f"policy_options.{name}")
    return {k: float(v) for k, v in value.items()}


def age_factor(age_s: float, max_age_s: float) -> float:
    if max_age_s <= 0:
        return 1.0 if age_s > 0 else 0.0
    return min(max(age_s, 0.0), max_age_s) / max_age_s


def size_factor(nodes: int, cluster_nodes: int, gpus: float, cluster_gpus: int, favor_small: bool) -> float:
    f = (min(nodes, cluster_nodes) / cluster_nodes + min(gpus, cluster_gpus) / cluster_gpus) / 2
    return 1.0 - f if favor_small else f


def relative(value: float, top: float) -> float:
    return value / top if top > 0 else 0.0


def slurm_priority(weights: dict[str, float], factors: dict[str, float]) -> int:
    """Sum of weight x factor, truncated to an integer, at least 1 (as Slurm stores it)."""
    total = sum(weights[w] * factors[w] for w in WEIGHTS)
    return max(1, int(total))


@policies.register("multifactor", "priority-multifactor", "slurm")
class Multifactor(EasyBackfill):
    name = "multifactor"
    summary = ("Slurm's priority/multifactor (age, fair-share with decay per account, job size, partition, QOS) "
               "under sched/backfill")
    options_doc: ClassVar[dict[str, str]] = {
        **EasyBackfill.options_doc,
        "PriorityWeightAge": "weight of the age factor (Slurm default 0)",
        "PriorityWeightFairshare": "weight of the fair-share factor (Slurm default 0)",
        "PriorityWeightJobSize": "weight of the job size factor (Slurm default 0)",
        "PriorityWeightPartition": "weight of the partition factor (Slurm default 0)",
        "PriorityWeightQOS": "weight of the QOS factor (Slurm default 0)",
        "PriorityMaxAge": "age at which the age factor reaches 1 (Slurm time; default 7-0)",
        "PriorityDecayHalfLife": "half-life of fair-share usage (Slurm time; 0: no decay; default 7-0)",
        "PriorityCalcPeriod": "how often priorities and usage decay are recomputed (Slurm time; default 5 minutes)",
        "PriorityFavorSmall": "true: smaller jobs get the larger size factor (default false)",
        "shares": "fair-share shares per account (Slurm Fairshare; default 1 each)",
        "qos_priority": "Priority of each QOS (default 0)",
        "partition_priority": "PriorityJobFactor of each partition (default 1)",
        "backfill": "true (default): sched/backfill; false: strict priority order (sched/builtin)"}

    def __init__(self, options=None, queues=None) -> None:
        super().__init__(options, queues)
        o = self.options
        self.weights: dict[str, float] = {}
        for w in WEIGHTS:
            v = o.get(w, 0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
                raise UserError(f"{w} is {v!r}: a weight is a number >= 0 (Slurm: an integer)",
                                field=f"policy_options.{w}")
            self.weights[w] = float(v)
        t = {k: slurm_time_s(o[k], k) if k in o else d for k, d in DEFAULT_TIMES_S.items()}
        self.max_age_s, self.half_life_s, self.calc_period_s = (t["PriorityMaxAge"], t["PriorityDecayHalfLife"],
                                                                t["PriorityCalcPeriod"])
        for flag in ("PriorityFavorSmall", "backfill"):
            if flag in o and not isinstance(o[flag], bool):
                raise UserError(f"{flag} is {o[flag]!r}: true or false", field=f"policy_options.{flag}")
        self.favor_small = bool(o.get("PriorityFavorSmall", False))
        self.backfill = bool(o.get("backfill", True))
        self.qos_priority = _number_map(o.get("qos_priority", {}), "qos_priority")
        self.partition_priority = _number_map(o.get("partition_priority", {}), "partition_priority")
        self.top_qos = max(self.qos_priority.values(), default=0.0)
        self.top_partition = max(self.partition_priority.values(), default=1.0)
        self.fairshare = FairShare(_number_map(o.get("shares", {}), "shares"), self.half_life_s)
        self.last_calc = -math.inf
        self._entry: dict[int, tuple] = {}   # job id -> its current (-tier, -priority, submit, seq, job)
        self._sorted: list[tuple] = []     # entries of waiting jobs, sorted; stale ones skipped
        self._by_id: dict[int, Job] | None = None
        self._fs: dict[str, float] = {}          # fair-share factors of the last calculation
        self._size: tuple[int, int, int] | None = None   # cluster nodes, GPUs, GPUs of the largest node

    # -- factors --------------------------------------------------------------------
    def prepare(self, sim: Any) -> None:
        """Every account of the workload holds its shares from the start, as Slurm's associations do;
        usage follows every start and stop at the instant it happens (the simulator's hooks)."""
        for j in sim.jobs:
            self.fairshare.account_known(self.account_of(j))
        self._by_id = sim.by_id
        fs, acct, kernel = self.fairshare, self.account_of, sim.kernel
        sim.hooks_start.append(lambda job: fs.on_start(acct(job), job.gpu_share, kernel.now))
        sim.hooks_stop.append(lambda job, _why: fs.on_stop(acct(job), job.gpu_share, kernel.now))

    @staticmethod
    def account_of(job: Job) -> str:
        return job.account or job.queue

    def factors(self, job: Job, now: float, fs: dict[str, float], view: View) -> dict[str, float]:
        if self._size is None:
            st = view.state
            own = ~st.node_cloud
            self._size = (max(1, int(own.sum())), max(1, int(st.node_gpus[own].sum())),
                           max(1, int(st.node_gpus.max())))
        n_nodes, n_gpus, per_node = self._size
        nodes = job.extra.get("nodes") or max(1, math.ceil(job.gpus / per_node))
        account = self.account_of(job)
        if account not in fs:   # an account no job of the workload had when the run began
            self.fairshare.account_known(account)
            fs.update(self.fairshare.factors(now))
        return {"PriorityWeightAge": age_factor(now - job.submit, self.max_age_s),
                "PriorityWeightFairshare": fs[account],
                "PriorityWeightJobSize": size_factor(int(nodes), n_nodes, job.gpu_share, n_gpus, self.favor_small),
                "PriorityWeightPartition": relative(self.partition_priority.get(job.partition, 1.0),
                                                    self.top_partition),
                "PriorityWeightQOS": relative(self.qos_priority.get(job.qos, 0.0), self.top_qos)}

    def priority(self, job: Job, now: float, fs: dict[str, float], view: View) -> int:
        return slurm_priority(self.weights, self.factors(job, now, fs, view))

    # -- order ----------------------------------------------------------------------
    def order(self, view: View):
        """Waiting jobs by PriorityTier, then priority (highest first), then submission."""
        now = view.now
        if now - self.last_calc >= self.calc_period_s:
            fs = self._fs = self.fairshare.factors(now)
            self._entry = {j.id: (-self.tier_of(j), -self.priority(j, now, fs, view), j.submit, j.seq, j)
                           for j in view.queue}
            self._sorted = sorted(self._entry.values())
            self.last_calc = now
        elif view.new:   # new jobs get their priority now, with the fair share of the last calculation
            fs = self._fs
            by_id = self._by_id
            new = [by_id[i] for i in view.new if i in by_id] if by_id is not None else \
                [j for j in view.queue if j.id in view.new]
            for j in new:
                if j.state == PENDING:   # a requeued job gets a new entry; its old one is skipped
                    e = self._entry[j.id] = (-self.tier_of(j), -self.priority(j, now, fs, view), j.submit, j.seq, j)
                    bisect.insort(self._sorted, e)
        if len(self._sorted) > 2 * len(view.queue) + 64:
            self._sorted = [e for e in self._sorted if e[-1].state == PENDING and self._entry.get(e[-1].id) is e]
        entry = self._entry
        return (e[-1] for e in self._sorted if e[-1].state == PENDING and entry.get(e[-1].id) is e)

    def schedule(self, view: View) -> list[Decision]:
        recalc = view.now - self.last_calc >= self.calc_period_s
        if recalc and not view.full:
            view = replace(view, full=True)   # the order changed: every job is looked at again
        if self._by_id is None and self.weights["PriorityWeightFairshare"]:
            raise RuntimeError("multifactor's fair share needs prepare(sim) before the run (run.build calls it)")
        if self.backfill:
            return super().schedule(view)
        if self._with_nodes:
            return self._builtin_sets(view)
        return self.greedy(view, self.order(view), blocking=True)

    def _builtin_sets(self, view: View) -> list[Decision]:
        """Strict priority order with node sets: a job that cannot start blocks the jobs after it
        that could use any of its partition's nodes (Slurm's main scheduler skips the rest of a
        partition that could not start a job)."""
        scr = Scratch(view.state)
        out: list[Decision] = []
        blocked: np.ndarray | None = None
        everything = np.ones(len(view.state.nodes), dtype=bool)
        for job in self.order(view):
            rej = self.too_big(view, job)
            if rej is not None:
                out.append(rej)
                continue
            own = self.part_mask(view, job)
            own = everything if own is None else own
            if blocked is not None and (blocked & own).any():
                if blocked.all():
                    break
                continue
            g = self.place(view, scr, job)
            if g is None:
                blocked = own.copy() if blocked is None else blocked | own
                continue
            scr.take(g, job.milli, job.cpu_milli, job.mem_mib)
            out.append(Start(job, g))
        return out
