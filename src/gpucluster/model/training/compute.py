"""Time of the compute kernels of a training step on one GPU.

- GEMMs: t = sqrt(t_flops^2 + t_bytes^2) + t0, a smooth roofline where
  t_flops = 2mnk / (peak x eff_max) and t_bytes = operand and result bytes / (HBM x
  hbm_fraction). (eff_max, t0) are fitted per chip and precision to the chip's
  measured GEMM table in the catalog (square shapes, least squares on relative
  error): t0 is the fixed cost of a kernel (launch, tail wave), eff_max the
  asymptotic fraction of the datasheet peak. Chips without measurements take the
  least efficient measured chip (a conservative default) and say so.
- Fused (flash) attention: its FLOPs at the chip's measured attention TFLOP/s
  (bf16/fp16 whatever the training precision; FP8 attention is not assumed).
- Sustained fraction: end-to-end training runs at lower clocks than short
  microbenchmarks (a power-capped chip under a full step's load); a per-chip,
  per-precision factor fitted on published training runs scales GEMM and
  attention throughput (benchmarks/cross_validate.py). Where a chip has none for
  this precision, its nearest sibling's (same vendor and architecture), else
  FALLBACK_SUSTAINED (an assumption, said so in the plan).
- Power cap (`power_cap_w`, catalog name `GPU@NNNW`): GEMM and attention throughput x the sustained
  clock the cap leaves (model/training/power.py, an estimate); memory-bound kernels keep their rate.
- Element-wise kernels (norms, activation functions, dropout, residual adds):
  memory-bound, bytes / (HBM x hbm_fraction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu, Precision
from gpucluster.catalog.siblings import nearest
from gpucluster.model.training.power import clock_fraction

# Tensor-core inputs: fp16 and bf16 run at the same rate on every chip in the catalog.
_SAME_RATE = {"fp16": "bf16", "bf16": "fp16"}
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5, "int8": 1}
DEFAULT_T0_S = 8e-6  # fallback kernel cost where nothing is measured (median of the fits)


TILE = 128  # output tile edge of the tensor-core GEMM kernels (cuBLAS/CUTLASS 128x128 class)


def wave_factor(m: float, n: float, batch: float, sms: int | None) -> float:
    """Wave quantization: a GEMM runs ceil(tiles / SMs) full waves of output tiles; the last,
    partly empty wave costs as much as a full one (>= 1; 1 when the SM count is unknown)."""
    if not sms:
        return 1.0
    tiles = math.ceil(m / TILE) * math.ceil(n / TILE) * max(1.0, batch)
    return math.ceil(tiles / sms) * sms / tiles


@dataclass(frozen=True)
class GemmCurve:
    gpu: str
    precision: str
    peak_tflops: float
    eff_max: float
    t0_s: float
    hbm_gbps: float       # achievable, GB/s
    provenance: str
    sms: int | None = None

    def batched_time_s(self, m: float, n: float, k: float, batch: float = 1.0) -> float:
        """One kernel of `batch` independent (m x k) @ (k x n) products (cuBLAS batched/strided)."""
        t_flops = batch * 2.0 * m * n * k * wave_factor(m, n, batch, self.sms) / (self.peak_tflops * 1e12 * self.eff_max)
        t_bytes = batch * (m * k + k * n + m * n) * ELEMENT_BYTES.get(self.precision, 2) / (self.hbm_gbps * 1e9)
        return math.hypot(t_flops, t_bytes) + self.t0_s

    def time_s(self, m: float, n: float, k: float, count: float = 1.0) -> float:
        """`count` separate kernels of one (m x k) @ (k x n) product each."""
        return count * self.batched_time_s(m, n, k)


def _sms(gpu: Gpu) -> int | None:
    return int(gpu.sm_count.value) if gpu.sm_count else None


# A fitted curve's large-GEMM rate is an extrapolation past the chip's largest measured shape. On
# the chips with a full square sweep (up to 16384^3 or 32768^3) it lands within 5% of the best
# measured rate (H100 bf16: 1.045x); a chip measured on small or skinny shapes only (H800's DeepGEMM
# table, MI325X fp8's two shapes) would extrapolate to 1.26-1.36x its best. Capped at this margin.
EXTRAPOLATION_MARGIN = 1.05


def _fit(points, sms: int | None = None, peak_tflops: float | None = None) -> tuple[float, float]:
    """Least squares on relative error of t = a*F*wave + t0 over measured (F, t); with the peak
    given, the large-GEMM efficiency 1/(a peak) is kept within EXTRAPOLATION_MARGIN of the best
    measured point (t0 refitted for that a)."""
    f = [2.0 * p.m * p.n * p.k * wave_factor(p.m, p.n, 1, sms) for p in points]
    t = [2.0 * p.m * p.n * p.k / (p.tflops * 1e12) for p in points]
    rate = [fi / ti for fi, ti in zip(f, t, strict=True)]
    inv = [1.0 / ti for ti in t]
    a, t0 = _lstsq2(rate, inv)
    if t0 < 0:  # a kernel cannot cost negative time: refit through the origin
        a, t0 = sum(rate) / sum(r ** 2 for r in rate), 0.0
    if peak_tflops:
        cap = EXTRAPOLATION_MARGIN * max(p.tflops for p in points) / peak_tflops
        if 1.0 / (a * peak_tflops * 1e12) > cap:
            a = 1.0 / (cap * peak_tflops * 1e12)
            t0 = max(0.0, sum(v * (1.0 - a * r) for r, v in zip(rate, inv, strict=True)) / sum(v * v for v in inv))
    return float(a), float(t0)


def _lstsq2(u: list[float], v: list[float]) -> tuple[float, float]:
    """(x, y) minimising sum((x u_i + y v_i - 1)^2): two-column QR (modified Gram-Schmidt), the
    answer numpy.linalg.lstsq gives, without loading numpy on the planner's start-up path."""
    r11 = math.sqrt(sum(x * x for x in u))
    q1 = [x / r11 for x in u]
    r12 = sum(q * x for q, x in zip(q1, v, strict=True))
    w = [x - r12 * q for q, x in zip(q1, v, strict=True)]
    r22 = math.sqrt(sum(x * x for x in w))
    if r22 <= 1e-12 * math.sqrt(sum(x * x for x in v)):  # rank one: numpy's minimum-norm answer
        import numpy as np

        (x, y), *_ = np.linalg.lstsq(np.array([u, v]).T, np.ones(len(u)), rcond=None)
        return float(x), float(y)
    y = sum(x / r22 for x in w) / r22
    return (sum(q1) - r12 * y) / r11, y


def hbm_gbps(gpu: Gpu) -> float:
    frac = gpu.efficiency.hbm_fraction.value if gpu.efficiency.hbm_fraction else \
        _lowest_hbm_fraction(gpu.architecture, gpu.vendor)
    return gpu.memory.bandwidth_tbps.value * 1000 * frac


@cache
def _lowest_hbm_fraction(architecture: str = "", vendor: str = "") -> float:
    """A chip without a STREAM figure: the lowest measured fraction among chips of its architecture (the
    same memory controllers), else of its vendor, else of any (conservative)."""
    chips = [(g, g.efficiency.hbm_fraction.value) for _, g in catalog.gpus.items() if g.efficiency.hbm_fraction]
    same = ([c for c in chips if c[0].architecture == architecture and c[0].vendor == vendor]
            or [c for c in chips if c[0].vendor == vendor] or chips)
    return float(min(f for _, f in same)) if same else 0.8


def _square_points(gpu: Gpu, precision: str):
    """The chip's square GEMMs at this precision (the cloud guides' fixed sweep); where it has none, its
    other measured shapes (best-shape searches, DeepGEMM's tables): its own figures before anyone else's."""
    same = {precision, _SAME_RATE.get(precision, precision)}
    mine = [p for p in gpu.efficiency.gemm if p.precision in same]
    return [p for p in mine if p.m == p.n == p.k] or mine


@cache
def _measured_fits(precision: str) -> tuple[tuple[float, float, str, str, str], ...]:
    """(eff_max, t0, name, architecture, vendor) of every chip with a measured GEMM at this precision
    (one point: its fraction of peak, with the default kernel cost)."""
    out: list[tuple[float, float, str, str, str]] = []
    for _, g in catalog.gpus.items():
        pts = _square_points(g, precision)
        if precision not in g.peak_tflops or not pts:
            continue
        peak = g.peak_tflops[precision].value
        if len(pts) >= 2:
            a, t0 = _fit(pts, _sms(g), peak)
            out.append((1.0 / (a * peak * 1e12), t0, g.name, g.architecture, g.vendor))
        else:
            out.append((min(1.0, pts[0].tflops / peak), DEFAULT_T0_S, g.name, g.architecture, g.vendor))
    return tuple(out)


@cache
def gemm_curve(gpu_name: str, precision: str) -> GemmCurve:
    gpu = catalog.gpus.get(gpu_name)
    if precision not in gpu.peak_tflops:
        raise ValueError(f"{gpu.name} has no {precision} peak in the catalog "
                         f"(it has: {', '.join(gpu.peak_tflops)})")
    peak = gpu.peak_tflops[precision].value
    pts = _square_points(gpu, precision)
    if len(pts) >= 2:
        a, t0 = _fit(pts, _sms(gpu), peak)
        eff = 1.0 / (a * peak * 1e12)
        prov = (f"fitted to {len(pts)} measured {gpu.name} GEMMs "
                f"({', '.join(sorted({gpu.sources[p.source].title[:40] for p in pts}))})")
    elif len(pts) == 1:
        p = pts[0]
        eff, t0 = min(1.0, p.tflops / peak), DEFAULT_T0_S
        prov = f"one measured {gpu.name} GEMM {p.m}x{p.n}x{p.k}: {p.tflops:g} TFLOP/s of {peak:g}"
    else:
        # A chip of the same architecture runs the same tensor cores and libraries (A100 40 GB and
        # 80 GB; H100 and H800): its curve, the least efficient such chip's. Else, conservatively,
        # the least efficient measured chip of the same vendor, else of any.
        fits = _measured_fits(precision) or _measured_fits(_SAME_RATE.get(precision, "bf16"))
        same = ([f for f in fits if f[3] == gpu.architecture and f[4] == gpu.vendor]
                or [f for f in fits if f[4] == gpu.vendor] or list(fits))
        if same:
            eff, t0, donor = min(same)[:3]
            kin = ("same architecture" if min(same)[3] == gpu.architecture else
                   "least efficient measured chip of the vendor" if min(same)[4] == gpu.vendor else
                   "least efficient measured chip")
            prov = (f"no {precision} GEMM measured on {gpu.name}: {donor}'s curve ({kin}; "
                    f"{100 * eff:.0f}% of peak; estimate)")
        else:
            eff, t0 = 0.6, DEFAULT_T0_S
            prov = f"no {precision} GEMM measured anywhere: 60% of peak assumed (estimate)"
    sus, sus_prov = sustained(gpu.name, precision)
    clock, clock_prov = clock_fraction(gpu.name)
    prov = f"{prov}; x {sus:g} {sus_prov}" + (f"; {clock_prov}" if clock_prov else "")
    return GemmCurve(gpu.name, precision, peak, min(eff, 1.0) * sus * clock, t0, hbm_gbps(gpu), prov, _sms(gpu))


# A chip with no published training run of its own or a sibling's at this precision (Blackwell and
# AMD today): its microbenchmark rate is not assumed sustained. 0.90 lies inside the fitted range
# (H100 bf16 0.78 to H100 fp8 1.00); the lowest fitted value was tried and made H100 fp8 runs 17%
# too slow in their leave-one-source-out fold, so it is no safer. An assumption, said so in the plan.
FALLBACK_SUSTAINED = 0.90


def _own_sustained(gpu: Gpu, precision: str) -> tuple[float, str] | None:
    table = gpu.efficiency.sustained_fraction
    key = precision if precision in table else _SAME_RATE.get(precision)
    if key not in table:
        return None
    return table[key].value, gpu.sources[table[key].source].kind


def sustained(gpu_name: str, precision: str) -> tuple[float, str]:
    """Fraction of microbenchmark throughput sustained in training, and where it comes from:
    the chip's own published runs (fp16 and bf16 run at one rate); else its nearest sibling's
    (same vendor and architecture, catalog/siblings.py: H200 and H800 take H100's, A100 40GB
    A100 80GB's), labelled borrowed; else FALLBACK_SUSTAINED."""
    gpu = catalog.gpus.get(gpu_name)
    own = _own_sustained(gpu, precision)
    if own is not None:
        return own[0], f"sustained in training ({own[1]})"
    found = nearest(gpu, precision, lambda g: _own_sustained(g, precision))
    if found is not None:
        sib, (value, _) = found
        return value, (f"no published {precision} training run on {gpu.name}: its sibling {sib.name}'s "
                       f"sustained fraction {value:g} assumed (same vendor and architecture; estimate)")
    return FALLBACK_SUSTAINED, (f"no published {precision} training run on {gpu.name} or a sibling: "
                                f"{FALLBACK_SUSTAINED:g} of the microbenchmark rate assumed (estimate)")


@cache
def attention_tflops(gpu_name: str) -> tuple[float, str]:
    """Achieved fused-attention TFLOP/s and where it comes from."""
    gpu = catalog.gpus.get(gpu_name)
    half: Precision = "bf16" if "bf16" in gpu.peak_tflops else "fp16"
    meas = gpu.efficiency.attention_tflops
    sus = sustained(gpu_name, half)[0] * clock_fraction(gpu_name)[0]
    if meas is not None:
        return meas.value * sus, f"measured: {gpu.sources[meas.source].title[:60]} x {sus:g} sustained"
    fracs = [g.efficiency.attention_tflops.value / g.peak_tflops["bf16"].value
             for _, g in catalog.gpus.items() if g.efficiency.attention_tflops and "bf16" in g.peak_tflops]
    frac = float(min(fracs)) if fracs else 0.3
    return frac * gpu.peak_tflops[half].value * sus, (f"estimate: the lowest measured fraction of {half} peak "
                                                      f"({frac:.2f}) among the chips with a measurement")


def elementwise_time_s(gpu_name: str, bytes_moved: float) -> float:
    return bytes_moved / (_hbm_gbps_of(gpu_name) * 1e9)


@cache
def _hbm_gbps_of(gpu_name: str) -> float:
    return hbm_gbps(catalog.gpus.get(gpu_name))
