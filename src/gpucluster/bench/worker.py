"""A benchmark rank: join the process group from the environment, run, and (rank 0) write the
result. `python -m gpucluster.bench.worker CONFIG.json OUT.json` is what the local launcher and
the CLI under torchrun/srun run.

A gloo run across nodes also carries a same-run baseline: just before it and right after it,
rank 0 runs the same collective at the bandwidth-regime sizes between two ranks on its own host
over loopback (the other ranks wait at a barrier). Gloo works on the CPU (TCP stack, copies, the
reduction), so on a busy or slow host it is the CPU, not the network, that caps the cross-node
figure; `diagnose` compares against that ceiling before it names the network. The baseline is
the lower of the two brackets at each size: a machine whose load swings during the run (other
jobs, a CI neighbour) is judged by the worst the host managed around it, so the network is named
only when even that leaves room (measured: a bracket taken only after the run read 0.52-0.60
GB/s while the run, under heavier load minutes earlier, got 0.15-0.25 through an uncapped link)."""

from __future__ import annotations

import json
import socket
import sys
from datetime import timedelta
from typing import Any

from gpucluster.bench.collective import BenchConfig, row_wrong, run_collective
from gpucluster.bench.rankenv import RankEnv

SCHEMA = "gpucluster-bench-collective/v1"
BASELINE_MIN_SIZE = 1 << 20      # the bandwidth regime diagnose compares (bench/diagnose.py MIN_BW_SIZE)
BASELINE_SIZES = 3


def baseline_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    big = [s for s in sizes if s >= BASELINE_MIN_SIZE][-BASELINE_SIZES:]
    return tuple(big or sorted(sizes)[-1:])


def loopback_baseline(cfg: BenchConfig, timeout_s: float = 300) -> dict:
    """The same collective between 2 ranks on this host over loopback (gloo): what this host's CPU
    delivers now, with no network in the path. A failure is recorded, never raised: the run's own
    figures stand without it."""
    from dataclasses import replace

    from gpucluster.bench.launcher import launch_local
    from gpucluster.errors import UserError

    sub = replace(cfg, sizes=baseline_sizes(cfg.sizes), check=False, corrupt_rank=None, measure_baseline=False)
    try:  # loopback even where the run was told to use another interface
        res = launch_local(sub, 2, timeout_s=timeout_s, node="loopback", extra_env={"GLOO_SOCKET_IFNAME": "lo"})
    except UserError as exc:
        return {"error": exc.reason, "rows": []}
    return {"rows": [{k: r[k] for k in ("size_bytes", "time_us", "algbw_gbps", "busbw_gbps")} for r in res["rows"]]}


def bracket(before: dict | None, after: dict) -> dict:
    """The baseline document: per size the lower busbw of the runs before and after."""
    what = ("the same collective, 2 ranks on this host over loopback (gloo), measured just before and right "
            "after the run; per size the lower of the two")
    runs = [b for b in (before, after) if b and b.get("rows")]
    errors = [b["error"] for b in (before, after) if b and b.get("error")]
    doc: dict = {"kind": "loopback", "what": what, "host": socket.gethostname(), "ranks": 2,
                 "before": (before or {}).get("rows"), "after": after.get("rows")}
    if not runs:
        return {**doc, "error": "; ".join(errors) or "no baseline measured", "rows": []}
    rows = []
    for row in runs[0]["rows"]:
        same = [r for b in runs for r in b["rows"] if r["size_bytes"] == row["size_bytes"]]
        rows.append(min(same, key=lambda r: r["busbw_gbps"]))
    return {**doc, "rows": rows, **({"error": "; ".join(errors)} if errors and len(runs) < 2 else {})}


def run_rank(cfg: BenchConfig, env: RankEnv, timeout_s: float = 300) -> dict | None:
    """Run one rank; rank 0 returns the result document, the others None."""
    import torch
    import torch.distributed as dist

    env.export()
    device = None
    if cfg.backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(cfg.backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                            timeout=timedelta(seconds=timeout_s))
    base_timeout = min(timeout_s / 3, 120.0)       # the others wait at a barrier meanwhile
    before = None
    try:
        where: list[Any] = [None] * env.world_size
        dist.all_gather_object(where, {"rank": env.rank, "node": env.node, "host": socket.gethostname()})
        baseline = cfg.backend == "gloo" and cfg.measure_baseline and len({w["node"] for w in where}) > 1
        if baseline:
            if env.rank == 0:
                before = loopback_baseline(cfg, base_timeout)
            dist.barrier()
        rows = run_collective(cfg, device)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if env.rank != 0:
        return None
    nodes: dict[str, list[int]] = {}
    for w in where:
        nodes.setdefault(w["node"], []).append(w["rank"])
    per_node = sorted({len(v) for v in nodes.values()})
    # nccl-tests averages every measured busbw, in-place and out-of-place
    figs = [r["busbw_gbps"] for r in rows] + [r["in_place"]["busbw_gbps"] for r in rows if r.get("in_place")]
    avg = sum(figs) / len(figs) if figs else 0.0
    result = {"schema": SCHEMA, **cfg.to_json(), "world_size": env.world_size, "nodes": len(nodes),
              "ranks_per_node": per_node[0] if len(per_node) == 1 else per_node,
              "node_ranks": nodes, "launcher": env.launcher, "torch": torch.__version__,
              "rows": rows, "avg_busbw_gbps": avg, "wrong_total": sum(row_wrong(r) for r in rows)}
    if baseline:
        result["baseline"] = bracket(before, loopback_baseline(cfg, base_timeout))
    return result


def main(argv: list[str]) -> int:
    from gpucluster.bench.rankenv import detect

    with open(argv[0]) as f:
        raw = json.load(f)
    cfg = BenchConfig(**{**raw, "sizes": tuple(raw["sizes"])})
    env = detect()
    if env is None:
        print("gpucluster.bench.worker: no RANK/WORLD_SIZE or SLURM_PROCID in the environment", file=sys.stderr)
        return 2
    result = run_rank(cfg, env)
    if result is not None:
        with open(argv[1], "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
