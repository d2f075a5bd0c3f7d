"""Slurm partitions as node sets, and the names of the simulator's nodes.

A node is named `<pool>-<index>` (`h200-0000`, `h200-0001`, ... in pool order) unless the
scenario's `hostnames:` gives a pool its Slurm names as a hostlist (`h200: gpu[01-16]`, one
name per node of the pool, in order). A queue's `nodes:` (a Slurm partition's Nodes=) is a
hostlist over those names; a job of that partition (its sacct Partition, else its workload's
queue) runs only there. Partitions may overlap; a job of a partition without `nodes:` may use
every node, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpucluster.errors import UserError
from gpucluster.specs.hostlist import compress, expand


def pool_hostnames(loaded: Any) -> dict[str, list[str]]:
    """The scenario's `hostnames:` per pool, checked against the cluster spec (a pool it names,
    one name per node, no name twice)."""
    spec, cluster = loaded.spec, loaded.cluster
    if not spec.hostnames:
        return {}
    if cluster is None:
        raise UserError("hostnames applies to a cluster spec's pools; a node list (nodes_csv) names its own nodes",
                        **loaded.where("hostnames"))
    pools = {p.name: p.count for p in cluster.node_pools}
    out: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for pool, expr in spec.hostnames.items():
        where = loaded.where("hostnames", pool)
        if pool not in pools:
            raise UserError(f"no node pool {pool!r} in the cluster (valid: {', '.join(pools)})", **where)
        try:
            names = expand(expr)
        except ValueError as why:
            raise UserError(f"not a hostlist: {why}", **where) from None
        if len(names) != pools[pool]:
            raise UserError(f"{expr!r} names {len(names)} nodes; pool {pool!r} has {pools[pool]}", **where)
        for n in names:
            if n in seen:
                raise UserError(f"node {n!r} is named by pools {seen[n]!r} and {pool!r}", **where)
            seen[n] = pool
        out[pool] = names
    return out


def node_name(names: dict[str, list[str]], pool: str, index: int) -> str:
    got = names.get(pool)
    return got[index] if got is not None else f"{pool}-{index:04d}"


def partition_of(job: Any) -> str:
    """A job's Slurm partition: the one sacct recorded, else its workload's queue."""
    return job.partition or job.queue


def resolve(state: Any, queues: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """(node mask per partition that names nodes, the names it gives that no node has)."""
    index = {n.name: i for i, n in enumerate(state.nodes)}
    masks: dict[str, np.ndarray] = {}
    unknown: dict[str, list[str]] = {}
    for q, spec in queues.items():
        if getattr(spec, "nodes", None) is None:
            continue
        mask = np.zeros(len(state.nodes), dtype=bool)
        missing = []
        for n in expand(spec.nodes):
            i = index.get(n)
            if i is None:
                missing.append(n)
            else:
                mask[i] = True
        masks[q] = mask
        if missing:
            unknown[q] = missing
    return masks, unknown


def names_text(state: Any, limit: int = 6) -> str:
    """The cluster's node names as a short hostlist, per pool (for error messages)."""
    by_pool: dict[str, list[str]] = {}
    for n in state.nodes:
        by_pool.setdefault(n.pool, []).append(n.name)
    parts = [compress(v) for v in by_pool.values()]
    return ", ".join(parts[:limit]) + (", ..." if len(parts) > limit else "")


def tiers(queues: dict[str, Any]) -> dict[str, int]:
    """PriorityTier per partition that gives one (Slurm's default, 1, for the rest)."""
    return {q: s.priority_tier for q, s in queues.items() if getattr(s, "priority_tier", None) is not None}


DEFAULT_TIER = 1
