"""One rank of the collective benchmark (nccl-tests semantics: sizes are the full buffer,
algbw = size / time, busbw = algbw x bus factor, #wrong counted on a checked iteration).

In-place and out-of-place are measured as what torch.distributed actually does, never copied
from one another: all_reduce and broadcast work on one tensor (in-place only: torch has no
out-of-place form); all_gather and reduce_scatter are measured both ways (in-place: the send
buffer is this rank's slice of the receive buffer, as nccl-tests does); all_to_all out-of-place
only. A row's figures are its `placement`; `in_place` holds the second measurement when there is one.

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
IN_PLACE_ONLY = ("all_reduce", "broadcast")          # torch's API works on one tensor
BOTH = ("all_gather", "reduce_scatter")               # out-of-place, then in-place on slices


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
    measure_baseline: bool = True     # gloo across nodes: also measure the host over loopback (diagnose)

    def to_json(self) -> dict:
        return {"op": self.op, "sizes": list(self.sizes), "dtype": self.dtype, "iters": self.iters,
                "warmup": self.warmup, "backend": self.backend, "check": self.check,
                "corrupt_rank": self.corrupt_rank, "measure_baseline": self.measure_baseline}


def _count(op: str, size: int, n: int, tbytes: int) -> tuple[int, int]:
    """(elements per rank buffer as nccl-tests prints `count`, elements each rank contributes)."""
    total = max(size // tbytes, n if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        total -= total % n
        return total // n, total // n
    return total, total


class _Op:
    """Buffers and the call for one collective at one size."""

    def __init__(self, torch, dist, op: str, per_rank: int, n: int, rank: int, dtype, device,
                 in_place: bool = False) -> None:
        self.torch, self.dist, self.op, self.n, self.rank = torch, dist, op, n, rank
        full = per_rank * n if op in ("all_gather", "reduce_scatter", "all_to_all") else per_rank
        mk = lambda k: torch.zeros(k, dtype=dtype, device=device)  # noqa: E731
        if op == "all_gather":
            self.recv = mk(full)
            self.send = self.recv.narrow(0, rank * per_rank, per_rank) if in_place else mk(per_rank)
        elif op == "reduce_scatter":
            self.send = mk(full)
            self.recv = self.send.narrow(0, rank * per_rank, per_rank) if in_place else mk(per_rank)
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


def _measure(o: _Op, cfg: BenchConfig, torch, dist, device, sync, rank: int) -> tuple[float, int]:
    """(slowest rank's mean seconds per call, wrong values summed over ranks) for one buffer setup."""
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
    return float(elapsed.item()), int(wrong.item())


def _figures(t: float, nbytes: int, op: str, n: int, wrong: int) -> dict:
    algbw = nbytes / t / 1e9 if t > 0 else 0.0
    return {"time_us": t * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, n), "wrong": wrong}


def row_wrong(row: dict) -> int:
    """Wrong values of a row over both measurements."""
    return int(row.get("wrong", 0)) + int((row.get("in_place") or {}).get("wrong", 0))


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
        nbytes = (per_rank * n if cfg.op in ("all_gather", "reduce_scatter", "all_to_all") else per_rank) * tbytes
        first_in_place = cfg.op in IN_PLACE_ONLY
        o = _Op(torch, dist, cfg.op, per_rank, n, rank, dtype, device, in_place=first_in_place)
        t, wrong = _measure(o, cfg, torch, dist, device, sync, rank)
        count = per_rank if cfg.op in ("all_gather", "reduce_scatter") else nbytes // tbytes
        row = {"size_bytes": nbytes, "count": count, "type": cfg.dtype, "redop": REDOP.get(cfg.op, "none"),
               "root": ROOT.get(cfg.op, -1), **_figures(t, nbytes, cfg.op, n, wrong),
               "placement": "in-place" if first_in_place else "out-of-place", "in_place": None}
        del o
        if cfg.op in BOTH:
            o = _Op(torch, dist, cfg.op, per_rank, n, rank, dtype, device, in_place=True)
            t2, wrong2 = _measure(o, cfg, torch, dist, device, sync, rank)
            row["in_place"] = _figures(t2, nbytes, cfg.op, n, wrong2)
            del o
        rows.append(row)
    return rows
