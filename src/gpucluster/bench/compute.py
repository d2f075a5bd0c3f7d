"""GEMM TFLOP/s and HBM bandwidth on a GPU (skipped, with the reason, on a machine without one),
and sequential storage throughput (write with fsync, then read) anywhere."""

from __future__ import annotations

import os
import time
from pathlib import Path

PRECISIONS = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


def no_gpu_reason() -> str | None:
    from gpucluster.bench.deps import require_torch

    torch = require_torch()
    if not torch.cuda.is_available():
        return "no GPU: torch.cuda.is_available() is False on this machine (run it on a GPU node)"
    return None


def _time_cuda(torch, fn, iters: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def gemm(sizes: list[int], precisions: list[str], iters: int = 20, warmup: int = 5) -> list[dict]:
    """Square m = n = k GEMMs: achieved TFLOP/s = 2 m n k / time."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = "tf32" in precisions
    rows = []
    for prec in precisions:
        dtype = getattr(torch, PRECISIONS[prec])
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            t = _time_cuda(torch, lambda a=a, b=b: a @ b, iters, warmup)
            rows.append({"m": n, "n": n, "k": n, "precision": prec, "time_s": t, "tflops": 2 * n ** 3 / t / 1e12})
            del a, b
    return rows


def hbm(size_bytes: int = 2 << 30, iters: int = 20, warmup: int = 5) -> dict:
    """Device-to-device copy: reads and writes `size` bytes each, so 2 x size / time."""
    import torch

    src = torch.empty(size_bytes // 4, device="cuda", dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    t = _time_cuda(torch, lambda: dst.copy_(src), iters, warmup)
    return {"size_bytes": size_bytes, "time_s": t, "tbps": 2 * size_bytes / t / 1e12,
            "device": torch.cuda.get_device_name()}


def storage(path: str, size_bytes: int = 1 << 30, block_bytes: int = 16 << 20) -> dict:
    """Write `size` bytes sequentially and fsync (what a checkpoint must wait for), then read them
    back. The read may come from the page cache (reported as such when it is faster than the write
    by 5x or more); for a cold read drop the cache first (echo 3 > /proc/sys/vm/drop_caches)."""
    d = Path(path)
    if not d.is_dir():
        from gpucluster.errors import UserError
        raise UserError("not a directory", file=path)
    f = d / f".gpucluster-storage-{os.getpid()}.bin"
    block = os.urandom(min(block_bytes, size_bytes))
    written = 0
    try:
        t0 = time.perf_counter()
        with open(f, "wb", buffering=0) as fh:
            while written < size_bytes:
                written += fh.write(block[: min(len(block), size_bytes - written)])
            os.fsync(fh.fileno())
        tw = time.perf_counter() - t0
        t0 = time.perf_counter()
        read = 0
        with open(f, "rb", buffering=0) as fh:
            while chunk := fh.read(block_bytes):
                read += len(chunk)
        tr = time.perf_counter() - t0
    except OSError as exc:   # a read-only folder, a full disk, a quota: one line, the file removed
        from gpucluster.errors import UserError
        raise UserError(f"cannot write and read a test file here: {exc.strerror or exc}", file=path[:200]) from None
    finally:
        f.unlink(missing_ok=True)
    w, r = written / tw / 1e9, read / tr / 1e9
    return {"path": str(d.resolve()), "size_bytes": written, "block_bytes": block_bytes, "write_gbps": w,
            "write_s": tw, "read_gbps": r, "read_s": tr, "read_maybe_cached": r > 5 * w}
