"""One rank of the collective benchmark (nccl-tests semantics: sizes are the full buffer,
algbw = size / time, busbw = algbw x bus factor, #wrong counted on a checked iteration).

Runs inside an initialised torch.distributed process group; returns rows on every rank."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpucluster.model.collectives import bus_factor

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
DTYPES = {"float": ("float32", 4), "double": ("float64", 8), "half": ("float16", 2),
          "bfloat16": ("bfloat16", 2), "int32": ("int32", 4)}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum"}
ROOT = {"broadcast": 0}


@dataclass(frozen=True)
class BenchConfig:
    op: str = "all_reduce"
    sizes: tuple[int, ...] = (8,)
    dtype: str = "float"
    iters: int = 20
    warmup: int = 5
    backend: str = "gloo"
    check: bool = True
    corrupt_rank: int | None = None   # test hook: this rank spoils its checked result

    def to_json(self) -> dict:
        return {"op": self.op, "sizes": list(self.sizes), "dtype": self.dtype, "iters": self.iters,
                "warmup": self.warmup, "backend": self.backend, "check": self.check,
                "corrupt_rank": self.corrupt_rank}


def _count(op: str, size: int, n: int, tbytes: int) -> tuple[int, int]:
    """(elements per rank buffer as nccl-tests prints `count`, elements each rank contributes)."""
    total = max(size // tbytes, n if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        total -= total % n
        return total // n, total // n
    return total, total


class _Op:
    """Buffers and the call for one collective at one size."""

    def __init__(self, torch, dist, op: str, per_rank: int, n: int, rank: int, dtype, device) -> None:
        self.torch, self.dist, self.op, self.n, self.rank = torch, dist, op, n, rank
        full = per_rank * n if op in ("all_gather", "reduce_scatter", "all_to_all") else per_rank
        mk = lambda k: torch.zeros(k, dtype=dtype, device=device)  # noqa: E731
        if op == "all_gather":
            self.send, self.recv = mk(per_rank), mk(full)
        elif op == "reduce_scatter":
            self.send, self.recv = mk(full), mk(per_rank)
        elif op == "all_to_all":
            self.send, self.recv = mk(full), mk(full)
        else:
            self.send, self.recv = mk(full), None

    def run(self) -> None:
        d, op = self.dist, self.op
        if op == "all_reduce":
            d.all_reduce(self.send)
        elif op == "broadcast":
            d.broadcast(self.send, src=0)
        elif op == "all_gather":
            d.all_gather_into_tensor(self.recv, self.send)
        elif op == "reduce_scatter":
            d.reduce_scatter_tensor(self.recv, self.send)
        else:
            d.all_to_all_single(self.recv, self.send)

    def fill_and_expect(self):
        """Known inputs and what every rank must hold afterwards (small integers: exact in any type)."""
        t, n, r, op = self.torch, self.n, self.rank, self.op
        if op == "all_reduce":
            self.send.fill_(r + 1)
            return lambda: self.send, float(n * (n + 1) // 2)
        if op == "broadcast":
            self.send.fill_(7 if r == 0 else 0)
            return lambda: self.send, 7.0
        if op == "all_gather":
            self.send.fill_(r + 1)
            per = self.send.numel()
            expect = t.arange(1, n + 1, dtype=t.float64).repeat_interleave(per)
            return lambda: self.recv, expect
        if op == "reduce_scatter":
            per = self.recv.numel()
            self.send.copy_(t.arange(1, n + 1, dtype=t.float64).repeat_interleave(per).to(self.send.dtype))
            return lambda: self.recv, float(n * (r + 1))
        per = self.send.numel() // n  # all_to_all: chunk j of rank r holds (r*n + j) % 64
        self.send.copy_(((t.arange(n, dtype=t.float64) + r * n) % 64).repeat_interleave(per).to(self.send.dtype))
        expect = ((t.arange(n, dtype=t.float64) * n + r) % 64).repeat_interleave(per)
        return lambda: self.recv, expect


def run_collective(cfg: BenchConfig, device=None) -> list[dict]:
    import torch
    import torch.distributed as dist

    n, rank = dist.get_world_size(), dist.get_rank()
    dtype = getattr(torch, DTYPES[cfg.dtype][0])
    tbytes = DTYPES[cfg.dtype][1]
    device = device or torch.device("cpu")
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    rows = []
    for size in cfg.sizes:
        per_rank, _ = _count(cfg.op, size, n, tbytes)
        o = _Op(torch, dist, cfg.op, per_rank, n, rank, dtype, device)
        nbytes = (per_rank * n if cfg.op in ("all_gather", "reduce_scatter", "all_to_all") else per_rank) * tbytes
        for _ in range(cfg.warmup):
            o.run()
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(cfg.iters):
            o.run()
        sync()
        elapsed = torch.tensor([(time.perf_counter() - t0) / max(cfg.iters, 1)], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)   # the slowest rank sets the time
        wrong = torch.zeros(1, dtype=torch.float64, device=device)
        if cfg.check:
            result, expect = o.fill_and_expect()
            o.run()
            sync()
            got = result().to(torch.float64)
            if cfg.corrupt_rank == rank:
                got[0] += 1
            wrong[0] = float((got != (expect.to(device) if hasattr(expect, "to") else expect)).sum().item())
            dist.all_reduce(wrong)
        t = float(elapsed.item())
        algbw = nbytes / t / 1e9 if t > 0 else 0.0
        count = per_rank if cfg.op in ("all_gather", "reduce_scatter") else nbytes // tbytes
        rows.append({"size_bytes": nbytes, "count": count, "type": cfg.dtype, "redop": REDOP.get(cfg.op, "none"),
                     "root": ROOT.get(cfg.op, -1), "time_us": t * 1e6, "algbw_gbps": algbw,
                     "busbw_gbps": algbw * bus_factor(cfg.op, n), "wrong": int(wrong.item())})
    return rows
