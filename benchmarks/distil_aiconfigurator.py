"""Distil aiconfigurator-core's measured kernel timings into catalog/data/serving_kernels.yaml.

aiconfigurator-core (NVIDIA, Apache-2.0, PyPI) ships per-GPU, per-engine kernel timings
(systems/data/<system>/<op>/<engine>/<version>/*.parquet). The serving step model needs four
small fits per chip, engine and precision, not the database:

- GEMM: t = t0 + hypot(flops / F, bytes / B) over the measured (m, n, k) grid restricted to
  dense-transformer shapes (n, k multiples of 1024 up to 64k, m 1..16384): the small-m floor t0,
  the achieved weight-read bandwidth B and the large-m rate F.
- decode (generation) attention: t = t0 + hypot(kv_bytes / B, flops / F) over batch, context,
  head counts (head dim 128), per KV-cache precision.
- all-reduce: the engine's custom all-reduce (and NCCL) t = alpha + bytes / B per group size,
  over 16 KiB..4 MiB messages (the decode and small-prefill range).

Run outside the project venv (needs pandas + pyarrow):
    pip download --no-deps -d /tmp/aic aiconfigurator-core==0.12.0 && unzip -q /tmp/aic/*.whl -d /tmp/aic/x
    /tmp/aicvenv/bin/python benchmarks/distil_aiconfigurator.py /tmp/aic/x/aiconfigurator_core/systems/data
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

PACKAGE = "aiconfigurator-core 0.12.0"
SYSTEMS = {"a100_sxm": "A100-SXM4-80GB", "h100_sxm": "H100-SXM5-80GB", "h200_sxm": "H200-SXM-141GB",
           "b200_sxm": "B200", "gb200": "GB200"}
# Datasheet dense peaks (TFLOP/s: bf16, fp8) and HBM (TB/s), the fits' upper bounds (catalog/data/gpus).
PEAKS = {"a100_sxm": (312, 312, 2.039), "h100_sxm": (989, 1979, 3.35), "h200_sxm": (989, 1979, 4.8),
         "b200_sxm": (2250, 4500, 8.0), "gb200": (2500, 5000, 8.0)}
ENGINES = ("trtllm", "vllm", "sglang")
GEMM_DTYPES = {"bfloat16": ("bf16", 2.0), "float16": ("fp16", 2.0), "fp8": ("fp8", 1.0)}
OUT = Path(__file__).resolve().parents[1] / "src" / "gpucluster" / "catalog" / "data" / "serving_kernels.yaml"


def _latest(d: Path) -> Path | None:
    vs = sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: [int(x) if x.isdigit() else 0
                                                                       for x in p.name.replace("rc", ".").split(".")])
    return vs[-1] if vs else None


def _fit3(flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray, f_max: float, b_max: float
          ) -> tuple[float, float, float, float]:
    """(t0_s, B GB/s, F TFLOP/s, median |rel err|) of t = t0 + hypot(flops/F, bytes/B), by grid search
    on the median relative error (robust to the tables' outliers), F up to the chip's dense peak
    and B up to its HBM peak (a fit may not claim more than the datasheet)."""
    t0s = np.linspace(0.0, min(30e-6, float(t.min())), 31)
    Bs = np.geomspace(b_max / 20, b_max, 60)[:, None, None]
    Fs = np.geomspace(f_max / 50, f_max, 60)[None, :, None]
    body = np.hypot(flops[None, None, :] / Fs, nbytes[None, None, :] / Bs)
    best = (np.inf, 0.0, 0.0, 0.0)
    for t0 in t0s:
        err = np.median(np.abs((t0 + body) / t - 1), axis=2)
        i, j = np.unravel_index(np.argmin(err), err.shape)
        if err[i, j] < best[0]:
            best = (float(err[i, j]), float(t0), float(Bs[i, 0, 0]), float(Fs[0, j, 0]))
    err, t0, B, F = best
    return t0, B / 1e9, F / 1e12, err


def _fit_regimes(m: np.ndarray, flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray, f_max: float,
                 b_max: float) -> tuple[float, float, float, float]:
    """GEMM fit in its two regimes: the small-m points (m <= 16: the weights' read) give t0 and the
    achieved weight-read bandwidth B (t = t0 + bytes / B, least squares in relative error); the
    large-m points (m >= 2048) give the rate F that the hypot blend needs, F = flops / sqrt((t - t0)^2
    - (bytes / B)^2), their median; both capped at the datasheet. Returns (t0, B GB/s, F TFLOP/s,
    median |rel err| of the blend over all points)."""
    small = (m <= 16) & (nbytes > 4e6)
    A = np.stack([np.ones(small.sum()), nbytes[small]], 1) / t[small, None]
    (t0, inv), *_ = np.linalg.lstsq(A, np.ones(small.sum()), rcond=None)
    t0 = float(min(max(t0, 0.0), 30e-6))
    B = float(min(1.0 / max(inv, 1e-15), b_max))
    big = m >= 2048
    body = np.maximum((t[big] - t0) ** 2 - (nbytes[big] / B) ** 2, 1e-18)
    F = float(min(np.median(flops[big] / np.sqrt(body)), f_max))
    err = float(np.median(np.abs((t0 + np.hypot(flops / F, nbytes / B)) / t - 1)))
    return t0, B / 1e9, F / 1e12, err


def gemm_fits(path: Path, peaks: tuple[float, float, float]) -> dict:
    d = pd.read_parquet(path)
    d = d[(d.n % 1024 == 0) & (d.k % 1024 == 0) & (d.n <= 65536) & (d.k <= 65536) & (d.m <= 16384)]
    out = {}
    for dt, (name, wb) in GEMM_DTYPES.items():
        x = d[d.gemm_dtype == dt]
        if len(x) < 50:
            continue
        m, n, k = (x[c].to_numpy(float) for c in ("m", "n", "k"))
        t = x.latency.to_numpy(float) * 1e-3
        flops = 2 * m * n * k
        nbytes = k * n * wb + m * k * wb + m * n * 2
        t0, B, F, err = _fit_regimes(m, flops, nbytes, t, peaks[1 if name == "fp8" else 0] * 1e12, peaks[2] * 1e12)
        out[name] = {"t0_us": round(t0 * 1e6, 2), "gbps": round(B), "tflops": round(F, 1),
                     "median_err": round(err, 3), "points": len(x)}
    return out


def attention_fits(path: Path, peaks: tuple[float, float, float]) -> dict:
    d = pd.read_parquet(path)
    d = d[(d.head_dim == 128) & (d.num_heads <= 128)]
    if "window_size" in d:
        d = d[d.window_size == 0]
    out = {}
    for kvd in d.kv_cache_dtype.unique():
        kb = 1.0 if "fp8" in kvd else 2.0
        x = d[d.kv_cache_dtype == kvd]
        x = x.sample(min(len(x), 600), random_state=0)
        b, h, kvh = x.batch_size.to_numpy(float), x.num_heads.to_numpy(float), x.num_key_value_heads.to_numpy(float)
        ctx = (x.isl + x.step).to_numpy(float)
        t = x.latency.to_numpy(float) * 1e-3
        nbytes = b * ctx * kvh * 128 * 2 * kb
        flops = 4 * b * h * ctx * 128
        t0, B, F, err = _fit3(flops, nbytes, t, peaks[0] * 1e12, peaks[2] * 1e12)
        out["fp8" if "fp8" in kvd else "bf16"] = {"t0_us": round(t0 * 1e6, 2), "gbps": round(B),
                                                  "tflops": round(F, 2), "median_err": round(err, 3)}
    return out


def moe_fits(path: Path, peaks: tuple[float, float, float]) -> dict:
    """The fused MoE op (routing, both grouped GEMMs, combine) under balanced routing, in the
    GEMM form: bytes are the weights of the experts the tokens touch on this rank, flops the
    routed tokens' (the same regimes as gemm: t0 and B from <= 64 tokens, F from >= 4096)."""
    d = pd.read_parquet(path)
    # The Mixtral-shaped rows (8 experts, top-2: 8x7B and 8x22B): few large experts, whose weight
    # reads dominate a decode step; the tables' fine-grained models (16-512 smaller experts) run
    # other regimes (one fit over all of them missed Mixtral by 30-40%) and are left to a later fit.
    d = d[(d.distribution == "balanced") & (d.num_experts == 8) & (d.topk == 2)]
    out = {}
    for dt, (name, wb) in GEMM_DTYPES.items():
        x = d[d.moe_dtype == dt]
        if len(x) < 50:
            continue
        n_tok, h, f = (x[c].to_numpy(float) for c in ("num_tokens", "hidden_size", "inter_size"))
        k, e, tp, ep = (x[c].to_numpy(float) for c in ("topk", "num_experts", "moe_tp_size", "moe_ep_size"))
        mats = np.where(x.kernel_source.str.contains("nongated").to_numpy(), 2.0, 3.0)
        touched = e / ep * (1 - (1 - k / e) ** n_tok)
        nbytes = touched * mats * h * f / tp * wb
        flops = 2 * n_tok * k / ep * mats * h * f / tp
        t = x.latency.to_numpy(float) * 1e-3
        small, big = n_tok <= 64, n_tok >= 4096
        A = np.stack([np.ones(small.sum()), nbytes[small]], 1) / t[small, None]
        (t0, inv), *_ = np.linalg.lstsq(A, np.ones(small.sum()), rcond=None)
        t0 = float(min(max(t0, 0.0), 100e-6))
        B = float(min(1.0 / max(inv, 1e-15), peaks[2] * 1e12))
        body = np.maximum((t[big] - t0) ** 2 - (nbytes[big] / B) ** 2, 1e-18)
        F = float(min(np.median(flops[big] / np.sqrt(body)), peaks[1 if name == "fp8" else 0] * 1e12))
        err = float(np.median(np.abs((t0 + np.hypot(flops / F, nbytes / B)) / t - 1)))
        out[name] = {"t0_us": round(t0 * 1e6, 2), "gbps": round(B / 1e9), "tflops": round(F / 1e12, 1),
                     "median_err": round(err, 3), "points": len(x)}
    return out


def allreduce_fits(path: Path) -> dict:
    d = pd.read_parquet(path)
    if "op_name" in d:
        d = d[d.op_name == "all_reduce"]
    d = d[(d.message_size >= 16384) & (d.message_size <= 4 * 2**20)]
    out = {}
    for g in (2, 4, 8):
        x = d[d.num_gpus == g]
        if x.empty:
            continue
        s = x.message_size.to_numpy(float)
        t = x.latency.to_numpy(float) * 1e-3
        A = np.stack([np.ones_like(s), s], 1)
        w = 1 / t   # relative least squares
        (alpha, inv), *_ = np.linalg.lstsq(A * w[:, None], t * w, rcond=None)
        out[g] = {"alpha_us": round(float(max(alpha, 1e-6)) * 1e6, 2), "gbps": round(1 / max(inv, 1e-15) / 1e9, 1)}
    return out


def main(root: Path) -> None:
    lines = [f"# Serving kernel figures distilled from {PACKAGE} (NVIDIA aiconfigurator, Apache-2.0):",
             "# measured kernel timings per GPU and engine (systems/data/<system>/<op>/<engine>/<version>).",
             "# Written by benchmarks/distil_aiconfigurator.py; every entry names its table and engine version.",
             "# gemm:      t = t0 + hypot(2mnk / tflops, weight+activation bytes / gbps)",
             "# attention: decode (generation) attention, t = t0 + hypot(KV bytes / gbps, 4 b h ctx d / tflops)",
             "# moe:       the fused MoE op, t = t0 + hypot(routed flops / tflops, touched experts' bytes / gbps)",
             "# allreduce: t = alpha + bytes / gbps per group size (engine's custom all-reduce; nccl: NCCL)",
             "# median_err: the fit's median relative error over the table's points.",
             "schema: gpucluster-serving-kernels/v1", "gpus:"]
    for sysname, gpu in SYSTEMS.items():
        base = root / sysname
        if not base.is_dir():
            continue
        lines.append(f"  {gpu}:")
        for eng in ENGINES:
            parts: list[str] = []
            gd = base / "gemm" / eng
            v = _latest(gd) if gd.is_dir() else None
            if v is not None and (v / "gemm_perf.parquet").exists():
                for prec, f in gemm_fits(v / "gemm_perf.parquet", PEAKS[sysname]).items():
                    parts.append(f"      gemm_{prec}: {{{', '.join(f'{a}: {b}' for a, b in f.items())}, "
                                 f"source: '{PACKAGE} {sysname}/gemm/{eng}/{v.name}'}}")
            ad = base / "attention" / eng
            v = _latest(ad) if ad.is_dir() else None
            if v is not None and (v / "generation_attention_perf.parquet").exists():
                for kv, f in attention_fits(v / "generation_attention_perf.parquet", PEAKS[sysname]).items():
                    parts.append(f"      decode_attention_{kv}: {{{', '.join(f'{a}: {b}' for a, b in f.items())}, "
                                 f"source: '{PACKAGE} {sysname}/attention/{eng}/{v.name}'}}")
            md = base / "moe" / eng
            # the version with the most few-expert rows (the latest may measure other models only)
            v = max((p for p in md.iterdir() if (p / "moe_perf.parquet").exists()),
                    key=lambda p: int((pd.read_parquet(p / "moe_perf.parquet", columns=["num_experts"])
                                       .num_experts == 8).sum()), default=None) if md.is_dir() else None
            if v is not None and (v / "moe_perf.parquet").exists():
                for prec, f in moe_fits(v / "moe_perf.parquet", PEAKS[sysname]).items():
                    parts.append(f"      moe_{prec}: {{{', '.join(f'{a}: {b}' for a, b in f.items())}, "
                                 f"source: '{PACKAGE} {sysname}/moe/{eng}/{v.name}'}}")
            cd = base / "comm" / eng
            v = None
            if cd.is_dir():
                cands = [p for p in cd.iterdir() if (p / "custom_allreduce_perf.parquet").exists()]
                v = max(cands, key=lambda p: p.name) if cands else None
            if v is not None:
                for g, f in allreduce_fits(v / "custom_allreduce_perf.parquet").items():
                    parts.append(f"      allreduce_{g}: {{alpha_us: {f['alpha_us']}, gbps: {f['gbps']}, "
                                 f"source: '{PACKAGE} {sysname}/comm/{eng}/{v.name}'}}")
            if parts:
                lines.append(f"    {eng}:")
                lines += parts
        nd = base / "comm" / "nccl"
        if nd.is_dir():
            v = max(nd.iterdir(), key=lambda p: p.name)
            parts = [f"      allreduce_{g}: {{alpha_us: {f['alpha_us']}, gbps: {f['gbps']}, "
                     f"source: '{PACKAGE} {sysname}/comm/nccl/{v.name}'}}"
                     for g, f in allreduce_fits(v / "nccl_perf.parquet").items()]
            if parts:
                lines.append("    nccl:")
                lines += parts
        print(gpu, flush=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(OUT)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
