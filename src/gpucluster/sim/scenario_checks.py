"""What a scenario asks that its cluster and policy can never give, found before the run.

Errors (a UserError naming the field, exit code 2), for what cannot be meant:
* static partitions that over-commit the cluster (their whole nodes, taken in pool
  order, run out before the last queue gets its `gpus`), a partition of 0 GPUs, or
  jobs sent to the leftover `default` partition when the named ones take every node;
* a Kueue flavor naming a GPU type the cluster does not have;
* Slurm partitions (`queues.X.nodes`, `priority_tier`) under a policy that does not model
  them (only backfill and the policies built on it do), a partition naming a node the
  cluster does not have, `hostnames:` with a node list (nodes_csv).

Warnings (in the summary, terminal and JSON, `warnings: [{code, workload, field,
jobs, message}]`), for jobs that will be rejected rather than run:
* `larger_than_cluster`: jobs no node of the cluster can ever hold (more GPUs than
  it has of the job's types, a share or CPU no node has); `no_gpu_type`: jobs
  (from a trace) whose GPU types the cluster lacks;
* `larger_than_partition` / `larger_than_quota`: jobs larger than their partition (static
  or a Slurm partition's node set),
  or than what their Kueue queue can ever hold (quota plus what it may borrow);
* `queue_without_quota`: Kueue jobs of a queue the scenario does not define (they
  only borrow).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpucluster.errors import UserError
from gpucluster.sim.jobs import Job
from gpucluster.sim.policies.backfill import EasyBackfill
from gpucluster.specs.scenario import Inference, LoadedScenario


def check_scenario(sim: Any, loaded: LoadedScenario) -> list[dict[str, Any]]:
    pol = sim.policy
    _slurm_partitions(sim, loaded)
    if pol.name == "partition":
        _partitions(sim, loaded)
    if pol.name == "kueue":
        _kueue_flavors(sim, loaded)
    warnings: list[dict[str, Any]] = []
    by_class: dict[str, list[Job]] = defaultdict(list)
    for j in sim.jobs:
        by_class[j.cls].append(j)
    for i, w in enumerate(loaded.spec.workloads):
        jobs = by_class.get(w.name, [])
        if isinstance(w, Inference):   # replicas are made during the run: one probe stands for them all
            jobs = [Job(-1, w.name, "replica", w.gpus_per_replica, 0.0, float("inf"), queue=w.queue,
                        priority=w.priority, types=frozenset(w.gpu_types) if w.gpu_types else None)]
        _class(sim, loaded, i, w, jobs, warnings)
    return warnings


def _class(sim: Any, loaded: LoadedScenario, i: int, w: Any, jobs: list[Job], warnings: list) -> None:
    pol = sim.policy
    size_field = {"training": "gpus", "batch": "gpus_per_task", "inference": "gpus_per_replica",
                  "pipeline": "gpus", "trace": "path"}[w.kind]
    found: dict[str, tuple[int, str]] = {}
    view = None
    for j in jobs:
        why = sim.cannot_ever_run(j)
        code = "no_gpu_type" if why.startswith("no GPU type") else "larger_than_cluster"
        if not why and pol.name == "partition":
            from gpucluster.sim.policies.base import View
            view = view or View(0.0, sim.state, [], {}, True, set(), 0)
            part = j.queue if j.queue in pol.masks else "default"
            room = pol._room(view, j, part)
            if j.gpu_share > room:
                why, code = f"more GPUs than partition {part!r} has of its types ({room})", "larger_than_partition"
        if not why and isinstance(pol, EasyBackfill):
            from gpucluster.sim.policies.base import View
            view = view or View(0.0, sim.state, [], {}, True, set(), 0)
            rej = pol.too_big(view, j)
            if rej is not None:
                why, code = rej.reason.replace("asks for", "each asks for", 1), "larger_than_partition"
        if not why and pol.name == "kueue" and pol.queues:
            from gpucluster.sim.policies.base import View
            view = view or View(0.0, sim.state, [], {}, True, set(), 0)
            pol._q(j.queue)
            fl = pol._flavors_for(view, j)
            cap = max((pol.quotas.ceiling(j.queue, f) for f in fl), default=0.0)
            if j.gpu_share > cap + 1e-9:
                why = (f"more GPUs than queue {j.queue!r} can ever get (its quota plus what it may borrow: "
                       f"{cap:g})")
                code = "larger_than_quota"
        if why:
            n, first = found.get(code, (0, why))
            found[code] = (n + 1, first)
    for code, (n, first) in found.items():
        what = "replicas" if w.kind == "inference" else "jobs"
        count = "every replica" if w.kind == "inference" else f"{n:,} of {len(jobs):,} {what}"
        warnings.append({"code": code, "workload": w.name, "field": f"workloads[{i}].{size_field}",
                         "jobs": n, "message": f"{w.name}: {count} can never run here ({first}); they will "
                                               "be rejected"})
    if pol.name == "kueue" and pol.queues and jobs and w.queue not in pol.queues:
        warnings.append({"code": "queue_without_quota", "workload": w.name, "field": f"workloads[{i}].queue",
                         "jobs": len(jobs), "message": f"{w.name}: queue {w.queue!r} is not among the scenario's "
                                                       f"queues ({', '.join(pol.queues)}): its jobs have no quota "
                                                       "and only borrow from the default cohort"})


def _partitions(sim: Any, loaded: LoadedScenario) -> None:
    pol, st = sim.policy, sim.state
    total = int(st.node_gpus[~st.node_cloud].sum())
    taken = 0
    for q, spec in loaded.spec.queues.items():
        want, got = spec.total_gpus, pol.sizes.get(q, 0)
        if want == 0:
            raise UserError(f"partition {q!r} has 0 GPUs: it gets no nodes and its jobs could never run "
                            "(give it GPUs or leave the queue out)", **loaded.where("queues", q, "gpus"))
        if got < want:
            raise UserError(f"the partitions over-commit the cluster: {q!r} asks for {want} GPUs but only "
                            f"{total - taken} of its {total} are left after the queues before it (partitions are "
                            "whole nodes, in pool order)", **loaded.where("queues", q, "gpus"))
        taken += got
    if pol.sizes.get("default", 1) == 0 and "default" not in loaded.spec.queues:
        for i, w in enumerate(loaded.spec.workloads):
            if w.queue not in loaded.spec.queues:
                raise UserError(f"queue {w.queue!r} has no partition and the leftover `default` partition has no "
                                f"nodes: the named partitions take all {total} GPUs",
                                **loaded.where("workloads", i, "queue"))


def _kueue_flavors(sim: Any, loaded: LoadedScenario) -> None:
    from gpucluster.sim.policies.kueue_quota import resolve_flavor
    types = list(sim.state.types)
    for q, spec in loaded.spec.queues.items():
        for name in spec.flavors or {}:
            if resolve_flavor(name, types) is None:
                raise UserError(f"flavor {name!r} is not a GPU type of the cluster (it has: {', '.join(types)})",
                                **loaded.where("queues", q, "flavors", name))


def _slurm_partitions(sim: Any, loaded: LoadedScenario) -> None:
    """Slurm partitions' node sets and tiers: only under policies that model them, over nodes
    the cluster has."""
    from gpucluster.sim.node_sets import names_text, partition_of, resolve
    spec, pol, st = loaded.spec, sim.policy, sim.state
    if spec.hostnames and loaded.cluster is None:
        raise UserError("hostnames applies to a cluster spec's pools; a node list (nodes_csv) names its own nodes",
                        **loaded.where("hostnames"))
    slurm = [(q, f) for q, s in spec.queues.items() for f in ("nodes", "priority_tier") if getattr(s, f) is not None]
    for q, s in spec.queues.items():
        if pol.name in ("kueue", "partition") and s.gpus is None and s.flavors is None:
            raise UserError(f"policy {pol.name} needs the queue's gpus (or flavors); {q!r} gives only Slurm "
                            "partition fields", **loaded.where("queues", q))
    if not slurm:
        return
    if not isinstance(pol, EasyBackfill):
        q, f = slurm[0]
        raise UserError(f"policy {pol.name} does not model Slurm partitions (node sets, PriorityTier): use "
                        "backfill or multifactor (or a policy built on backfill: topo, hetero)",
                        **loaded.where("queues", q, f))
    _, unknown = resolve(st, spec.queues)
    for q, names in unknown.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise UserError(f"partition {q!r} names nodes the cluster does not have: {shown} (its nodes: "
                        f"{names_text(st)}; name them with hostnames: per pool)", **loaded.where("queues", q, "nodes"))
    with_nodes = {q for q, s in spec.queues.items() if s.nodes is not None}
    other: dict[str, int] = {}
    for j in sim.jobs:
        p = partition_of(j)
        if p not in spec.queues:
            other[p] = other.get(p, 0) + 1
    if with_nodes and other:
        sim.notes.append(f"{sum(other.values()):,} jobs of partitions the scenario's queues do not define "
                         f"({', '.join(sorted(other)[:5])}) may use every node")
