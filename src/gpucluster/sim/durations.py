"""Training durations from the training planner, cached per (model, GPU type, GPU count).

The planner's layout search takes from milliseconds to seconds, so a simulation of
thousands of jobs calls it once per distinct key, never once per job. The fabric
of each GPU type is its first pool's (NVLink domain, NICs, leaf size); a type
with no pool (a cloud-burst type) is scaled from the nearest pool by dense bf16
peak (an estimate).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from gpucluster.errors import UserError
from gpucluster.sim.jobs import INF
from gpucluster.sim.workload import BATCH_TOKENS, Context, peak_speeds
from gpucluster.specs.cluster import ClusterSpec
from gpucluster.units import parse_count


@lru_cache(maxsize=4096)
def step_seconds(cluster: ClusterSpec, pool_name: str, model: str, gpus: int, global_batch: int, seq_len: int,
                 precision: str) -> float | None:
    """Best step time for `gpus` GPUs of the pool, or None when no layout fits."""
    from gpucluster.model.topology import scale_out_view
    from gpucluster.model.training.fabric import TrainingFabric
    from gpucluster.plan.train_search import search
    from gpucluster.specs.workload import load_model_spec

    pool = cluster.pool(pool_name)
    view = scale_out_view(cluster, pool.name)
    fabric = TrainingFabric(pool.gpu, pool.gpus_per_node, view.domain_size, view.scale_out_link,
                            view.nic_gbps_per_gpu_per_direction, view.oversubscription, view.nodes_per_leaf,
                            f"{pool.nics_per_node} x {pool.nic}")
    if precision not in fabric.gpu.peak_tflops:
        return None
    best = search(load_model_spec(model), fabric, gpus, global_batch, seq_len=seq_len, top=1,
                  precision=precision).best
    return None if best is None else best.step_s


def planner_works(ctx: Context, w: Any, types: list[str], sizes: list[int],
                  where: dict) -> dict[int, tuple[float, dict[str, float] | None]]:
    """For each GPU count: (work seconds on the reference type, speed per type)."""
    from gpucluster.specs.workload import load_model_spec

    cluster = ctx.loaded.cluster
    if cluster is None:
        raise UserError("model-based durations need a cluster spec (not nodes_csv)", **where)
    try:
        spec = load_model_spec(w.model)
        tokens = parse_count(w.tokens)
    except ValueError as exc:
        raise UserError(str(exc), **ctx.loaded.where(*where_loc(where), "tokens")) from None
    except UserError as exc:
        raise UserError(exc.reason, **ctx.loaded.where(*where_loc(where), "model")) from None
    seq = spec.seq_len
    gbs = w.global_batch or max(1, round(BATCH_TOKENS / seq))
    steps = tokens / (gbs * seq)
    pool_of: dict[str, str] = {}
    for p in cluster.node_pools:
        pool_of.setdefault(p.gpu, p.name)
    reference = w.reference_gpu or types[0]
    out: dict[int, tuple[float, dict[str, float] | None]] = {}
    for g in sizes:
        secs: dict[str, float] = {}
        for t in types:
            pool = pool_of.get(t)
            if pool is None:
                continue
            step = step_seconds(cluster, pool, str(w.model), g, gbs, seq, w.precision)
            if step is not None:
                secs[t] = steps * step
        for t in types:  # types without a pool: scaled from a planned one by peak (not a type it does not fit)
            if t not in secs and secs and t not in pool_of:
                base = next(iter(secs))
                secs[t] = secs[base] / (peak_speeds([base, t], base) or {t: 1.0})[t]
        if not secs:
            out[g] = (INF, {t: 0.0 for t in types})
            continue
        ref = reference if reference in secs else next(iter(secs))
        work = secs[ref]
        speeds = {t: (work / secs[t] if t in secs else 0.0) for t in types}
        out[g] = (work, None if len(types) == 1 and types[0] in secs else speeds)
        per_type = ", ".join(f"{t} {secs[t] / 3600:.1f} h" + ("" if t == ref else f" ({speeds[t]:.2f}x)")
                             if t in secs else f"{t} does not fit" for t in types)
        ctx.notes.append(f"{w.name}: {g} GPUs -> {per_type} per job ({spec.name or w.model}, {w.tokens} tokens, "
                         f"planner; speed relative to {ref})")
    return out


def where_loc(where: dict) -> tuple:
    """The key path back from a `where` dict (field 'workloads[2]' -> ('workloads', 2))."""
    import re
    out: list[Any] = []
    for part in re.findall(r"[^.\[\]]+", where.get("field") or ""):
        out.append(int(part) if part.isdigit() else part)
    return tuple(out)
