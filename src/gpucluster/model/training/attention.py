"""Attention kernels by generation: which kernel runs, and its achieved forward and backward TFLOP/s.

A registry of the fused attention kernels training stacks run (`unfused` is the bmm / softmax /
dropout / bmm chain of kernels.py). Each kernel's rate on a chip comes from that chip's own
measurements in the catalog (`efficiency.attention`, folded from shared/reference/
microbench-public.yaml with sources), as a function of sequence length, head dim and masking:

    rate(s, d, causal) = R_chip,kernel x c^causal / (1 + s0/s + d0/d)

R is the chip's own level for the kernel (median over its rows of rate / shape factor). The shape
(s0: the per-query-row cost of loading Q, the softmax rescale and the epilogue, amortised over the
keys; d0: the per-element non-matmul work against the head dim's matmul work; c: the diagonal blocks
a causal mask half-fills) is fitted per kernel on every chip's rows that state a shape (FlashAttention
FLOP convention: causal halved), and pooled over kernels where one kernel's rows cannot fix it.
Backward rate = forward rate x the chip's own backward/forward ratio, measured (`backward` rows) or
derived from a combined `fwd_bwd` figure: t_fb = F/r_f + 2.5F/r_b. A chip without a kernel's rows
borrows the same kernel's level from the measured chip of its own architecture (else the least
efficient measured chip) as a fraction of bf16 peak, and says so: the provenance string names it.

"default" is a documented default per generation (GENERATION_DEFAULT), that a framework may override
(`framework_default`, model/training/frameworks.py); `flash` is an alias of the default.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu

FLASH_BACKWARD_FLOPS = 2.5  # Dao 2023 (FlashAttention-2 section 3.2): the backward runs 5 products to the forward's 2


@dataclass(frozen=True)
class Kernel:
    name: str
    measured_as: str      # the `kernel` of the catalog rows (microbench-public's names)
    about: str


KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("unfused", "", "bmm, scale-mask-softmax, dropout, bmm: the s x s scores in HBM (Megatron <= 2022)"),
    Kernel("flash2", "fa2", "FlashAttention-2 (Dao 2023); on ROCm the CK-based port (ROCm/flash-attention)"),
    Kernel("flash3", "fa3", "FlashAttention-3 (Shah et al. 2024): Hopper warp specialisation, TMA, WGMMA"),
    Kernel("cudnn", "cudnn", "cuDNN fused SDPA (Transformer Engine's FusedAttention)"),
    Kernel("fa4", "fa4", "FlashAttention-4 (2026): Blackwell tcgen05, TMEM"),
    Kernel("cutlass_fmha_sm100", "cutlass_fmha_sm100", "CUTLASS FMHA for sm100 (Blackwell)"),
    Kernel("triton", "triton", "Triton fused attention (the OpenAI/AMD tutorial kernel family)"),
    Kernel("flashmla", "flashmla", "DeepSeek FlashMLA: multi-head latent attention (head dim 576/512)"),
)}
ALIASES = {"fa2": "flash2", "fa3": "flash3", "ck": "flash2", "fused": "cudnn", "te": "cudnn", "sdpa": "flash2"}
# What a stack that states nothing runs on each generation (a framework may say otherwise:
# framework_default). Ampere, Ada and Hopper: FlashAttention-2, what PyTorch's SDPA and the flash-attn
# package run (FlashAttention-3 is a separate opt-in build; Transformer Engine may pick cuDNN). On the
# public runs it is the one that fits: Llama 3 405B at 128K context (Dubey et al. 2024) comes out +10%
# with FlashAttention-2's measured H100 rates and +28% with cuDNN's, and NeMo 24.12's H100 runs agree
# (in-sample, docs/catalog.md). Blackwell: cuDNN's fused attention, the kernel tuned for sm100 (FA2 runs
# at a fifth of its rate there, cudnn-frontend's B200 table). ROCm: the CK port of FlashAttention-2.
# Older chips have no fused kernel of their own: they borrow FlashAttention-2's rate (said so).
GENERATION_DEFAULT = {"Ampere": "flash2", "Ada Lovelace": "flash2", "Hopper": "flash2", "Blackwell": "cudnn",
                      "CDNA3": "flash2", "CDNA2": "flash2"}
FALLBACK_DEFAULT = "flash2"
_HALF = ("bf16", "fp16")   # attention runs in bf16/fp16 whatever the GEMM precision (FP8 attention not assumed)


def known() -> list[str]:
    return [*KERNELS, *ALIASES, "default", "flash"]


def canonical(name: str) -> str:
    """A stated attention setting as one name: `flash` (the stack's fused kernel), `unfused`, or a
    registry kernel (aliases resolved: fa2 -> flash2, te -> cudnn, ...). ValueError lists the known ones."""
    key = name.strip().lower()
    if key in ("flash", "default"):
        return "flash"
    key = ALIASES.get(key, key)
    if key not in KERNELS:
        raise ValueError(f"unknown attention kernel {name!r} (known: {', '.join(known())})")
    return key


def kernel_problem(kernel: str) -> str | None:
    """Why a layout's `attention_kernel` is not a kernel name (None: it is), for layout checks."""
    name = kernel.strip().lower()
    if name in ("default", "flash") or ALIASES.get(name, name) in KERNELS:
        return None
    return f"attention_kernel must be one of {', '.join(known())}, got {kernel!r}"


def resolve(kernel: str, gpu: Gpu, framework_default: str | None = None) -> str:
    """The registry name a layout's `attention_kernel` means on this chip."""
    name = kernel.strip().lower()
    if name in ("default", "flash"):
        name = framework_default or GENERATION_DEFAULT.get(gpu.architecture, FALLBACK_DEFAULT)
        name = name.strip().lower()
    name = ALIASES.get(name, name)
    if name not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r} (known: {', '.join(known())})")
    return name


@cache
def resolve_on(kernel: str, gpu_name: str, framework_default: str | None = None) -> str:
    """`resolve` by GPU name (cached: the layer model asks once per layer shape)."""
    return resolve(kernel, catalog.gpus.get(gpu_name), framework_default)


# ---- the fit ------------------------------------------------------------------------------------------

class Row(NamedTuple):
    """One catalog AttentionPoint as plain numbers (the fit reads them many times)."""
    tflops: float
    seq_len: int | None
    head_dim: int | None
    causal: bool | None
    direction: str


def _rows(gpu: Gpu, measured_as: str) -> list[Row]:
    return [Row(p.tflops, p.seq_len, p.head_dim, p.causal, p.direction) for p in gpu.efficiency.attention
            if p.kernel == measured_as and p.precision in _HALF]


def _terms(p: Row) -> tuple[float, float, float]:
    """(1/s, 1/d, causal) of a shaped row."""
    return 1.0 / float(p.seq_len or 1), 1.0 / float(p.head_dim or 1), 1.0 if p.causal else 0.0


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gauss-Jordan on a small normal-equation system (no numpy on the start-up path)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-18:
            return [0.0] * n
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


@dataclass(frozen=True)
class Shape:
    s0: float       # tokens
    d0: float       # head-dim elements
    causal: float   # multiplier of a causal mask (<= 1)
    rows: int
    kernels: str

    def factor(self, s: float, d: float, causal: bool) -> float:
        return (self.causal if causal else 1.0) / (1.0 + self.s0 / max(s, 1.0) + self.d0 / max(d, 1.0))


def _fit_shape(groups: list[list[Row]], label: str) -> Shape | None:
    """Fit (s0, d0, causal) shared by the groups (one group per chip and kernel, each with its own level):
    log r = log R_g - log(1 + s0/s + d0/d) + causal log c, alternating levels and a linearised solve."""
    shaped = [[p for p in g if p.seq_len and p.head_dim and p.direction == "forward"] for g in groups]
    shaped = [g for g in shaped if g]
    n = sum(len(g) for g in shaped)
    if n < 4:
        return None
    s0, d0, c = 0.0, 0.0, 1.0
    for _ in range(20):
        levels = [statistics.median(p.tflops / Shape(s0, d0, c, 0, "").factor(p.seq_len or 1, p.head_dim or 1,
                                                                            bool(p.causal)) for p in g)
                  for g in shaped]
        # R/r = (1 + s0/s + d0/d) / c^causal ~ 1 + s0/s + d0/d + causal (1/c - 1): linear in three unknowns
        xs, ys = [], []
        for g, lv in zip(shaped, levels, strict=True):
            for p in g:
                inv_s, inv_d, cz = _terms(p)
                xs.append([inv_s, inv_d, cz])
                ys.append(lv / p.tflops - 1.0)
        ata = [[sum(x[i] * x[j] for x in xs) for j in range(3)] for i in range(3)]
        atb = [sum(x[i] * y for x, y in zip(xs, ys, strict=True)) for i in range(3)]
        if not any(x[2] for x in xs):
            ata[2][2] += 1.0  # no causal row: leave c at 1
        sol = _solve(ata, atb)
        s0, d0 = max(0.0, sol[0]), max(0.0, sol[1])
        c = 1.0 / (1.0 + max(0.0, sol[2]))
    return Shape(s0, d0, c, n, label)


@cache
def _all_groups() -> dict[str, list[tuple[str, list[Row]]]]:
    out: dict[str, list[tuple[str, list[Row]]]] = {}
    for _, g in catalog.gpus.items():
        for k in KERNELS.values():
            rows = _rows(g, k.measured_as) if k.measured_as else []
            if rows:
                out.setdefault(k.name, []).append((g.name, rows))
    return out


@cache
def kernel_shape(kernel: str) -> Shape:
    groups = _all_groups().get(kernel, [])
    own = _fit_shape([r for _, r in groups], f"{kernel} rows of {', '.join(n for n, _ in groups)}")
    if own is not None:
        return own
    return _pooled_shape()


@cache
def _pooled_shape() -> Shape:
    """For a kernel whose rows cannot fix a shape: the median of the kernels' own fits."""
    fits = [f for k, gs in _all_groups().items()
            if (f := _fit_shape([r for _, r in gs], k)) is not None]
    if not fits:
        return Shape(0.0, 0.0, 1.0, 0, "none (no shaped row anywhere)")
    return Shape(statistics.median(f.s0 for f in fits), statistics.median(f.d0 for f in fits),
                 statistics.median(f.causal for f in fits), sum(f.rows for f in fits),
                 f"rows of {', '.join(f.kernels for f in fits)} (median of their fits: this kernel's rows state no shape)")


@dataclass(frozen=True)
class KernelRate:
    gpu: str
    kernel: str
    level_tflops: float        # R above, forward
    backward_ratio: float      # backward rate / forward rate
    shape: Shape
    provenance: str

    def forward_tflops(self, s: float, d: float, causal: bool) -> float:
        return self.level_tflops * self.shape.factor(s, d, causal)

    def backward_tflops(self, s: float, d: float, causal: bool) -> float:
        return self.forward_tflops(s, d, causal) * self.backward_ratio


def _combined(rows: list[Row]) -> list[Row]:
    """Combined forward+backward figures. A row whose pass is `unstated` counts as one: the Azure guide's
    FlashAttention-2 figures match the FlashAttention README's fwd_bwd ones on the same chips (A100 hd64:
    179.5 vs 176; H100 hd128: 327.9 vs 328-338) and sit below its forward ones (H100: 362-370)."""
    return [p for p in rows if p.direction in ("fwd_bwd", "unstated")]


def _level(rows: list[Row], shape: Shape, ratio: float | None) -> tuple[float, str]:
    """Forward level R from the forward rows; else from the combined rows split with a backward ratio."""
    fwd = [p for p in rows if p.direction == "forward"]
    shaped = [p for p in fwd if p.seq_len and p.head_dim]
    if shaped:
        return statistics.median(p.tflops / shape.factor(p.seq_len or 1, p.head_dim or 1, bool(p.causal))
                                 for p in shaped), ""
    if fwd:  # best-case figures without a stated shape: their ceiling is the level (microbench README)
        return max(p.tflops for p in fwd), " (best-case figure, shape not stated)"
    both = [p for p in _combined(rows) if p.seq_len and p.head_dim]
    if both and ratio:
        # t = F/r_f + 2.5 F/(rho r_f)  =>  r_f = r_fb (1 + 2.5/rho) / 3.5
        split = (1 + FLASH_BACKWARD_FLOPS / ratio) / (1 + FLASH_BACKWARD_FLOPS)
        return statistics.median(p.tflops * split / shape.factor(p.seq_len or 1, p.head_dim or 1, bool(p.causal))
                                 for p in both), (" (from combined forward+backward figures, split with a backward"
                                                  f"/forward ratio of {ratio:.2f} borrowed)")
    return 0.0, ""


def _own_backward(rows: list[Row], level: float, shape: Shape) -> float | None:
    ratios = []
    for p in rows:
        if p.direction not in ("backward", "fwd_bwd", "unstated"):
            continue
        fwd = level * shape.factor(p.seq_len or 16384, p.head_dim or 128, bool(p.causal))
        if p.direction == "backward":
            ratios.append(p.tflops / fwd)
        else:
            inv_b = ((1 + FLASH_BACKWARD_FLOPS) / p.tflops - 1 / fwd) / FLASH_BACKWARD_FLOPS
            if inv_b > 0:
                ratios.append(1 / inv_b / fwd)
    return statistics.median(ratios) if ratios else None


@cache
def _measured(gpu_name: str, kernel: str) -> tuple[float, float | None, str] | None:
    """The chip's own (level, backward ratio, note) for the kernel, or None."""
    gpu = catalog.gpus.get(gpu_name)
    rows = _rows(gpu, KERNELS[kernel].measured_as)
    if not rows:
        return None
    shape = chip_shape(gpu_name, kernel)
    level, note = _level(rows, shape, None)
    if level > 0:
        return level, _own_backward(rows, level, shape), note
    ratio, who = _forward_backed_ratio(kernel)
    level, note = _level(rows, shape, ratio)
    # The split's ratio is borrowed: the provenance names where from, and it is not the chip's own.
    return (level, None, note.replace("borrowed)", f"borrowed from {kernel} on {who})")) if level > 0 else None


@cache
def chip_shape(gpu_name: str, kernel: str) -> Shape:
    """The kernel's shape, with s0 refitted on the chip's own forward rows where they span sequence lengths
    (a faster tensor core leaves the per-row softmax work a larger share: B200 cuDNN at 8K runs 18% below
    its 32K rate, H100's FlashAttention kernels a few percent)."""
    base = kernel_shape(kernel)
    rows = [p for p in _rows(catalog.gpus.get(gpu_name), KERNELS[kernel].measured_as)
            if p.direction == "forward" and p.seq_len and p.head_dim]
    lens = {p.seq_len or 0 for p in rows}
    if len(lens) < 2 or max(lens) < 2 * min(lens):
        return base

    def err(s0: float) -> float:
        sh = Shape(s0, base.d0, base.causal, 0, "")
        logs = [math.log(p.tflops / sh.factor(p.seq_len or 1, p.head_dim or 1, bool(p.causal))) for p in rows]
        mid = statistics.median(logs)
        return sum((x - mid) ** 2 for x in logs)

    grid = [0.0] + [8.0 * 1.25 ** i for i in range(40)]   # 8 .. ~48K tokens
    best = min(grid, key=err)
    return Shape(best, base.d0, base.causal, len(rows),
                 f"{base.kernels}, s0 refitted on {len(rows)} {gpu_name} rows")


@cache
def _forward_backed_ratio(kernel: str) -> tuple[float | None, str]:
    """Backward/forward ratio of the kernel on the chips whose forward is measured (to split combined rows)."""
    got = []
    for name, rows in _all_groups().get(kernel, []):
        level, _ = _level(rows, chip_shape(name, kernel), None)
        if level > 0 and (r := _own_backward(rows, level, chip_shape(name, kernel))):
            got.append((name, r))
    if not got:
        return None, ""
    return statistics.median(r for _, r in got), ", ".join(n for n, _ in got)


def _peak(gpu: Gpu) -> float:
    half = "bf16" if "bf16" in gpu.peak_tflops else "fp16"
    return gpu.peak_tflops[half].value if half in gpu.peak_tflops else 0.0


@cache
def _pooled_backward(kernel: str) -> tuple[float, str]:
    own = [(n, m[1]) for n, _ in _all_groups().get(kernel, []) if (m := _measured(n, kernel)) and m[1]]
    if own:
        return statistics.median(r for _, r in own), f"{kernel} on {', '.join(n for n, _ in own)}"
    every = [(n, k, m[1]) for k, gs in _all_groups().items() for n, _ in gs if (m := _measured(n, k)) and m[1]]
    if every:
        return statistics.median(r for *_, r in every), "every measured kernel (pooled)"
    return 1.0, "no backward measured anywhere: the forward rate (estimate)"


@cache
def kernel_rate(gpu_name: str, kernel: str) -> KernelRate:
    """The chip's forward level and backward ratio for a registry kernel (not `unfused`), with provenance."""
    gpu = catalog.gpus.get(gpu_name)
    base = _base_name(gpu)
    shape = chip_shape(base, kernel)
    own = _measured(base, kernel)
    if own is not None:
        level, bwd, note = own
        prov = f"{kernel} measured on {base}{note}"
    else:
        donors = [(n, m[0] / _peak(catalog.gpus.get(n))) for n, _ in _all_groups().get(kernel, [])
                  if (m := _measured(n, kernel)) and _peak(catalog.gpus.get(n)) > 0]
        same_arch = [d for d in donors if catalog.gpus.get(d[0]).architecture == gpu.architecture]
        if same_arch:
            # The best-measured chip of the same architecture (most rows; same tensor cores and kernels).
            rows = {n: len(r) for n, r in _all_groups().get(kernel, [])}
            donor, frac = max(same_arch, key=lambda d: (rows.get(d[0], 0), -d[1]))
        elif donors:
            # Another generation: the median measured chip (one chip's port, e.g. FlashAttention-2 on
            # Blackwell, is no guide to another generation's).
            donor, frac = sorted(donors, key=lambda d: d[1])[(len(donors) - 1) // 2]
        elif kernel != FALLBACK_DEFAULT:
            # No chip ran this kernel: the chip's own FlashAttention-2 rate (measured or borrowed).
            fb = kernel_rate(gpu_name, FALLBACK_DEFAULT)
            return KernelRate(gpu_name, kernel, fb.level_tflops, fb.backward_ratio, fb.shape,
                              f"{kernel} never measured: this chip's {FALLBACK_DEFAULT} rate (assumption); "
                              f"{fb.provenance}")
        else:
            return _finish(gpu_name, kernel, 0.3 * _peak(gpu), None, shape,
                           f"{kernel} never measured anywhere: 30% of bf16 peak (assumption)")
        level, bwd, shape = frac * _peak(gpu), None, chip_shape(donor, kernel)
        donor_own = _measured(donor, kernel)
        bwd_from = None
        if same_arch and donor_own is not None and donor_own[1] is not None:
            bwd, bwd_from = donor_own[1], donor   # same kernel, same architecture: its backward ratio too
        ref = shape.factor(8192, 128, True)  # the donor's fraction at a reference shape, not its asymptote
        prov = (f"{kernel} not measured on {base}: borrowed from {donor} at {frac * ref:.2f} of bf16 peak "
                f"at s=8K, d=128, causal (assumption)")
        return _finish(gpu_name, kernel, level, bwd, shape, prov, bwd_from)
    return _finish(gpu_name, kernel, level, bwd, shape, prov)


def _finish(gpu_name: str, kernel: str, level: float, bwd: float | None, shape: Shape, prov: str,
            bwd_from: str | None = None) -> KernelRate:
    if bwd is None:
        bwd, who = _pooled_backward(kernel)
        prov += f"; backward/forward {bwd:.2f} borrowed from {who} (assumption)"
    elif bwd_from:
        prov += f"; backward/forward {bwd:.2f} borrowed from {kernel} on {bwd_from} (same architecture; assumption)"
    else:
        prov += f"; backward/forward {bwd:.2f} measured"
    prov += f"; shape fitted on {shape.rows} {shape.kernels}"
    return KernelRate(gpu_name, kernel, level, bwd, shape, prov)


def _base_name(gpu: Gpu) -> str:
    """A power-capped variant (catalog name X@NNNW) measures as its uncapped chip."""
    return gpu.name.split("@", 1)[0]


# ---- what one layer's attention core costs -----------------------------------------------------------

def keys_per_query(seq_len: float, causal: bool, window: int | None) -> float:
    """Average keys a query attends to: s (full), s/2 (causal), about w - w^2/2s (causal sliding window w)."""
    if window and window < seq_len:
        w = float(window)
        return (w * (w + 1) / 2 + (seq_len - w) * w) / seq_len if causal else w
    return seq_len / 2 if causal else seq_len


def attention_times_s(gpu_name: str, kernel: str, flops: float, seq_len: float, cp: int, head_dim: float,
                      causal: bool, window: int | None, clock: float = 1.0, sustained: float = 1.0
                      ) -> tuple[float, float]:
    """(forward, backward) seconds of a fused kernel doing `flops` forward FLOPs (FlashAttention convention)."""
    rate = kernel_rate(gpu_name, kernel)
    # With context parallelism the ring runs one kernel per K/V block of s/cp keys, most of them unmasked.
    s_call = seq_len / cp
    if window:
        s_call = min(s_call, float(window))
    masked = causal and cp == 1
    scale = clock * sustained * 1e12
    fwd = flops / (rate.forward_tflops(s_call, head_dim, masked) * scale)
    bwd = FLASH_BACKWARD_FLOPS * flops / (rate.backward_tflops(s_call, head_dim, masked) * scale)
    return fwd, bwd


def describe(gpu_name: str, kernel: str, framework_default: str | None = None) -> str:
    """One line for plans and `catalog`: which kernel and where its rate comes from."""
    gpu = catalog.gpus.get(gpu_name)
    name = resolve(kernel, gpu, framework_default)
    if name == "unfused":
        return "unfused attention (scores in HBM): GEMM curve and HBM bandwidth"
    r = kernel_rate(gpu.name, name)
    return (f"{name}: {r.forward_tflops(8192, 128, True):.0f} TFLOP/s forward, "
            f"{r.backward_tflops(8192, 128, True):.0f} backward at s=8192, d=128, causal ({r.provenance})")


def clear() -> None:
    for f in (resolve_on, _all_groups, kernel_shape, chip_shape, _pooled_shape, _measured, _forward_backed_ratio, _pooled_backward,
              kernel_rate):
        f.cache_clear()

