"""Does a GEMM's speed depend on its reduction width k beyond what the chip's GEMM curve says?
A diagnostic on aiconfigurator-core's measured GEMM tables (measured, not adopted: docs/training.md).

A GEMM kernel computes its output in tiles; each tile runs a main loop over k and a fixed prologue
(filling the operand pipeline) and epilogue (converting and writing the tile). In units of main-loop
work the fixed part is k0, so a GEMM would take

    t = hypot(2 m n k x wave / (peak x eff) x (1 + k0 / k), bytes / HBM) + t0

This script fits (eff, k0, t0) by least squares on relative error over the bf16 table of the
torch.matmul path (aiconfigurator's vLLM tables: cuBLAS, what PyTorch stacks call), 512 <= n, k <=
32768, with HBM at the catalog's achievable bandwidth, twice: over m, n >= 1024 and over m, n >= 4096
(training's GEMMs: thousands of tokens by a hidden width). Over m, n >= 1024 k0 is 92-252; over the
large ones it falls to 0-138 (Hopper and Blackwell 0-85: their persistent kernels overlap one tile's
epilogue with the next tile's main loop), a few percent at training shapes. So compute.GemmCurve
keeps no k term.

Run outside the project venv (needs pandas, pyarrow, scipy):
    pip download --no-deps -d /tmp/aic aiconfigurator-core==0.12.0 && unzip -q /tmp/aic/*.whl -d /tmp/aic/x
    PYTHONPATH=src /tmp/aicvenv/bin/python benchmarks/fit_gemm_k_overhead.py /tmp/aic/x/aiconfigurator_core/systems/data
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

PACKAGE = "aiconfigurator-core 0.12.0"
ENGINE = "vllm"
SYSTEMS = {"a100_sxm": "A100-SXM4-80GB", "h100_sxm": "H100-SXM5-80GB", "h200_sxm": "H200-SXM-141GB",
           "b200_sxm": "B200", "gb200": "GB200"}
TILE = 128


def _table(root: Path, system: str) -> tuple[Path, pd.DataFrame]:
    versions = sorted((root / system / "gemm" / ENGINE).iterdir())
    path = versions[-1] / "gemm_perf.parquet"
    d = pd.read_parquet(path)
    d = d[(d.gemm_dtype == "bfloat16") & (d.n >= 512) & (d.k >= 512) & (d.n <= 32768)
          & (d.k <= 32768)]
    return path, d


def fit(d: pd.DataFrame, peak_tflops: float, sms: int, hbm_gbps: float) -> dict[str, float]:
    m, n, k = (d[c].to_numpy(float) for c in ("m", "n", "k"))
    t = d.latency.to_numpy(float) * 1e-3
    tiles = np.ceil(m / TILE) * np.ceil(n / TILE)
    flops = 2 * m * n * k * np.ceil(tiles / sms) * sms / tiles / (peak_tflops * 1e12)
    mem = (m * k + k * n + m * n) * 2 / (hbm_gbps * 1e9)

    def rel(p: np.ndarray, with_k0: bool) -> np.ndarray:
        eff, k0, t0_us = p if with_k0 else (p[0], 0.0, p[1])
        return (np.hypot(flops / eff * (1 + k0 / k), mem) + t0_us * 1e-6) / t - 1

    free = least_squares(lambda p: rel(p, True), [0.8, 100, 5], bounds=([0.1, 0, 0], [1.2, 5000, 100]))
    flat = least_squares(lambda p: rel(p, False), [0.8, 5], bounds=([0.1, 0], [1.2, 100]))
    rms = lambda e: float(np.sqrt(np.mean(e ** 2)))  # noqa: E731
    return {"k0": float(free.x[1]), "eff": float(free.x[0]), "t0_us": float(free.x[2]),
            "rms": rms(rel(free.x, True)), "rms_without": rms(rel(flat.x, False)),
            "k512_without": float(np.median(rel(flat.x, False)[k == 512])), "points": len(d)}


def main(root: Path) -> None:
    from gpucluster.catalog import catalog
    from gpucluster.model.training.compute import hbm_gbps

    for system, chip in SYSTEMS.items():
        gpu = catalog.gpus.get(chip)
        if gpu.sm_count is None:
            raise SystemExit(f"{chip} has no SM count in the catalog: the wave term needs it")
        path, d = _table(root, system)
        for least in (1024, 4096):
            sub = d[(d.m >= least) & (d.n >= least)]
            r = fit(sub, gpu.peak_tflops["bf16"].value, int(gpu.sm_count.value), hbm_gbps(gpu))
            print(f"{chip:16} m, n >= {least:5d}: k0 {r['k0']:4.0f}  (eff {r['eff']:.3f}, t0 {r['t0_us']:.1f} us; "
                  f"rms {r['rms']:.3f}, without k0 {r['rms_without']:.3f}; k = 512 shapes "
                  f"{100 * r['k512_without']:+.0f}% without; {r['points']} points of {PACKAGE} {path.relative_to(root)})")

if __name__ == "__main__":
    main(Path(sys.argv[1]))
