"""What the rules read: the cluster spec (with its lines), the job files, the model, and
estimates shared between rules (training plan, reliability plan, facility), computed once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpucluster.check.jobs import JobFile, Setting
from gpucluster.errors import UserError
from gpucluster.specs.cluster import ClusterSpec, NodePool
from gpucluster.specs.loader import PathKey, line_of
from gpucluster.specs.workload import TransformerSpec

_INT = re.compile(r"^\s*(\d+)")
# The model check rules assume when none is given: the seeds' workload ("training a 70B parameter model").
DEFAULT_MODEL = "llama3-70b"


def as_int(s: Setting | None) -> int | None:
    """The leading integer of a setting ("8", "gpu:h200:8" -> handled by callers, "2-4" -> 2); None if absent."""
    if s is None:
        return None
    m = _INT.match(s.value)
    return int(m.group(1)) if m else None


def nodes_range(text: str) -> tuple[int, int] | None:
    """(MIN, MAX) of a possible #SBATCH --nodes value ("4" -> (4, 4), "2-4" -> (2, 4)); None when
    nodes_problem() says it is impossible."""
    if nodes_problem(text) is not None:
        return None
    low, _, high = text.strip().partition("-")
    return int(low), int(high or low)


def nodes_problem(text: str) -> str | None:
    """Why an #SBATCH --nodes value is impossible (sbatch takes N or MIN-MAX, 1 <= MIN <= MAX), or
    None. `-3`, `0`, `abc`, `1e9`, `4-2` and 2**64 were read as "the whole pool"."""
    m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", text)
    if not m:
        return "not a node count (N or MIN-MAX)"
    if any(g is not None and len(g) > 7 for g in m.groups()):
        return "more than 1,000,000 nodes"
    low = int(m.group(1))
    high = int(m.group(2)) if m.group(2) else low
    if low < 1:
        return "fewer than 1 node"
    if high < low:
        return f"minimum {low} above maximum {high}"
    return None


@dataclass
class CheckContext:
    spec: ClusterSpec
    spec_path: str
    spec_lines: dict[PathKey, int]
    jobs: list[JobFile]
    model: TransformerSpec
    model_given: bool = False
    profile: str = "llama3"
    pool_name: str | None = None
    interfaces: list[str] | None = None            # real interface names, if the user gave them
    input_gbps_per_gpu: float | None = None         # training input per GPU, if the user gave it
    checkpoint_interval_s: float | None = None      # the user's checkpoint interval (CLI)
    checkpoint_tier: str | None = None
    notes: list[str] = field(default_factory=list)

    # -- where --------------------------------------------------------------------------
    def at(self, *path: str | int) -> str:
        line = line_of(tuple(path), self.spec_lines)
        return f"{self.spec_path}:{line}" if line else self.spec_path

    @property
    def pool(self) -> NodePool:
        return self.spec.pool(self.pool_name) if self.pool_name else self.spec.node_pools[0]

    def pool_index(self) -> int:
        return self.spec.node_pools.index(self.pool)

    # -- job facts ------------------------------------------------------------------------
    def job_settings(self, *names: str) -> list[tuple[JobFile, Setting]]:
        """Every job's value for the first of `names` it sets: env, #SBATCH directive or command option."""
        out = []
        for job in self.jobs:
            for n in names:
                s = job.env.get(n) or job.directives.get(n)
                if s is None:
                    s = next((c.option(n) for c in job.commands if c.option(n) is not None), None)
                if s is not None:
                    out.append((job, s))
                    break
        return out

    @cached_property
    def _job_nodes_and_note(self) -> tuple[int, str | None]:
        """(nodes the estimates use, why that is not the job's own count or None)."""
        for job in self.jobs:
            s = job.directives.get("nodes")
            bad = nodes_problem(s.value) if s is not None else None
            n = as_int(s) if s is not None and not bad else None      # impossible: a finding (sbatch-gres)
            for c in job.commands:
                n = n or as_int(c.option("nnodes"))
            for w in job.workloads:
                n = n or as_int(w.pods)
            if n:
                used = max(1, min(n, self.pool.count))
                return used, (None if used == n else f"the job asks {n} nodes, the pool has {self.pool.count}")
            if s is not None and bad:
                # Estimates need a count; the header says it is the pool's, not the job's.
                return self.pool.count, (f"the job's --nodes={s.value.strip()[:40]} is invalid ({bad}); estimates "
                                         f"assume the whole pool, {self.pool.count} nodes")
        return self.pool.count, None

    @property
    def job_nodes(self) -> int:
        """Nodes the job runs on: the first job file that says, else the whole pool (capped at the pool)."""
        return self._job_nodes_and_note[0]

    @property
    def job_nodes_note(self) -> str | None:
        """Why job_nodes is not the job's own count (an impossible --nodes, more nodes than the pool), or None."""
        return self._job_nodes_and_note[1]

    @cached_property
    def job_gpus(self) -> int:
        return self.job_nodes * self.pool.gpus_per_node

    # -- shared estimates (computed once, on first use) -------------------------------------
    @cached_property
    def target(self):
        from gpucluster.plan.fabric_from import from_cluster
        return from_cluster(self.spec_path, self.pool.name, self.job_nodes)

    @cached_property
    def training(self) -> Any:
        """The training plan, or the UserError that says why there is none (the model does not fit)."""
        from gpucluster.plan.run_estimates import train
        try:
            return train(self.model, self.target)
        except UserError as exc:
            return exc

    @cached_property
    def reliability(self) -> Any:
        from gpucluster.plan.reliability_plan import reliability_plan
        if not self.spec.storage:
            return None
        return reliability_plan(self.spec, self.model, profile=self.profile, pool=self.pool.name,
                                nodes=self.job_nodes, interval_s=self.checkpoint_interval_s)

    @cached_property
    def facility(self) -> Any:
        from gpucluster.catalog.operations import facility_limits, price_book
        from gpucluster.model.facility import facility_report
        book = price_book()
        return facility_report(self.spec, facility_limits(), book.host_base_w.value, default_pue=book.pue.value)

    def step_s(self, fabric=None) -> float | None:
        """Best step time on the job's GPUs (on another fabric for what-ifs); None when nothing fits."""
        from gpucluster.plan.run_estimates import default_global_batch
        from gpucluster.plan.train_search import search
        if fabric is None:
            plan = self.training
            return None if isinstance(plan, UserError) else plan.best.step_s
        res = search(self.model, fabric, self.target.gpus, default_global_batch(self.model), seq_len=self.model.seq_len,
                     top=1)
        return None if res.best is None else res.best.step_s

    @property
    def model_note(self) -> str:
        name = self.model.name or "the model"
        return name if self.model_given else f"{name} (default; pass --model)"
