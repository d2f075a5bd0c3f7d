"""A benchmark rank: join the process group from the environment, run, and (rank 0) write the
result. `python -m gpucluster.bench.worker CONFIG.json OUT.json` is what the local launcher and
the CLI under torchrun/srun run."""

from __future__ import annotations

import json
import socket
import sys
from datetime import timedelta

from gpucluster.bench.collective import BenchConfig, run_collective
from gpucluster.bench.rankenv import RankEnv

SCHEMA = "gpucluster-bench-collective/v1"


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
    try:
        where = [None] * env.world_size
        dist.all_gather_object(where, {"rank": env.rank, "node": env.node, "host": socket.gethostname()})
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
    avg = sum(r["busbw_gbps"] for r in rows) / len(rows) if rows else 0.0
    return {"schema": SCHEMA, **cfg.to_json(), "world_size": env.world_size, "nodes": len(nodes),
            "ranks_per_node": per_node[0] if len(per_node) == 1 else per_node,
            "node_ranks": nodes, "launcher": env.launcher, "torch": torch.__version__,
            "rows": rows, "avg_busbw_gbps": avg, "wrong_total": sum(r["wrong"] for r in rows)}


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
