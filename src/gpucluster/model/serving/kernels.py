"""Which measured kernels a serving replica's step stands on: its engine's (catalog/data/engines.yaml)
kernel tables where the chip has them (catalog/data/serving_kernels.yaml, distilled from
aiconfigurator-core), else the chip's microbenchmarks (training.compute) and the collective model.

Resolved once per replica (chip, TP, precisions, engine) and shared by step_time.py (scalars) and
step_table.py (arrays), so that the two stay the same formulas."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from gpucluster.catalog.serving import Engine, KernelFit, engine_names, get_engine, kernel_fit
from gpucluster.model.training.compute import GemmCurve, attention_tflops, gemm_curve, hbm_gbps

if TYPE_CHECKING:
    from gpucluster.model.serving.step_time import Replica
    from gpucluster.model.training.fabric import TrainingFabric

KERNEL_S = 1.5e-6        # one small kernel under CUDA graphs (estimate, see step_time)
# The measured all-reduce fits cover 16 KiB..4 MiB (the engines' custom all-reduce switches to NCCL
# above a few MiB); larger messages (big prefills) take the collective model's bandwidth.
AR_MEASURED_MAX_BYTES = 4 * 2**20
_EXPERT_BYTES = {"bf16": 2.0}


@dataclass(frozen=True)
class Kernels:
    engine: Engine
    gemm: GemmCurve                   # the math precision's GEMMs
    half: GemmCurve                   # 16-bit GEMMs (output layer)
    expert: GemmCurve                 # MoE expert GEMMs at the precision the engine runs them
    weight_bytes: float
    act_bytes: float
    expert_weight_bytes: float
    expert_act_bytes: float
    hbm_gbps: float                   # achievable HBM (element-wise kernels)
    decode_attention: tuple[float, float, float]    # (t0 s, KV bytes/s, FLOP/s)
    prefill_attention: tuple[float, float, float]
    allreduce: tuple[float, float] | None           # (alpha s, bytes/s) measured; None: the fabric model
    launch_s: float                   # CPU launch per kernel in a decode step (0 under CUDA graphs)
    host_step_s: float | None        # None: the engine is not named (fitted.STEP_HOST_S applies)
    provenance: str
    fabric: TrainingFabric            # the replica's placement (all-reduces beyond the measured range)
    tp: int

    def allreduce_s(self, size_bytes: float) -> float:
        """One TP all-reduce of `size_bytes`: measured up to AR_MEASURED_MAX_BYTES, else the fabric's."""
        if size_bytes <= 0:
            return 0.0
        if self.allreduce is not None and size_bytes <= AR_MEASURED_MAX_BYTES:
            return self.allreduce[0] + size_bytes / self.allreduce[1]
        return self.fabric.time_s("all_reduce", size_bytes, self.tp, 1)


def _curve(gpu_name: str, precision: str, fit: KernelFit | None) -> GemmCurve:
    base = gemm_curve(gpu_name, precision)
    if fit is not None:
        return GemmCurve(gpu_name, precision, fit.tflops, 1.0, fit.t0_s, fit.gbps, f"measured: {fit.source}", base.sms)
    borrowed = _borrowed(_gemm_key(precision))
    if borrowed is None:
        return base
    # No engine-measured GEMM tables for this chip. Its microbenchmarks are large GEMMs (1024 and
    # up): they fix the compute side but not what a decode-shaped GEMM (m of 1..a few hundred) costs,
    # a fixed kernel cost plus weight reads, which a STREAM triad overstates. Both are borrowed from
    # the chips with measured tables: their median fixed cost, and their median ratio of weight-read
    # bandwidth to their own STREAM bandwidth, applied to this chip's STREAM figure (an assumption).
    t0_s, ratio, n = borrowed
    prov = (f"{base.provenance}; decode-shaped GEMMs: {t0_s * 1e6:.1f} us fixed cost and weight reads at "
            f"{ratio:.2f} x STREAM, the medians of {n} engine-measured {_gemm_key(precision)} tables on other "
            f"chips (aiconfigurator-core 0.12.0; assumption: no serving GEMM measured on {gpu_name})")
    return GemmCurve(gpu_name, precision, base.peak_tflops, base.eff_max, t0_s, base.hbm_gbps * ratio, prov, base.sms)


@lru_cache(maxsize=16)
def _borrowed(key: str) -> tuple[float, float, int] | None:
    """(fixed cost s, read GB/s over the chip's STREAM GB/s, tables) over every chip and engine with a
    measured `key` table (gemm_fp8, decode_attention_bf16, ...): the medians. Pooled over engines: on a
    chip without tables the kernel library is none of theirs, so no one engine's figure is more apt
    than the typical one."""
    from statistics import median

    from gpucluster.catalog import catalog

    sources = sorted({s for s in (get_engine(e).kernel_data for e in engine_names()) if s})
    t0s: list[float] = []
    ratios: list[float] = []
    for chip, gpu in catalog.gpus.items():
        for fit in filter(None, (kernel_fit(chip, src, key) for src in sources)):
            t0s.append(fit.t0_s)
            ratios.append(fit.gbps / hbm_gbps(gpu))
    return (float(median(t0s)), float(median(ratios)), len(t0s)) if t0s else None


def _borrowed_attention(key: str, hbm: float, attn_flops: float) -> tuple[float, float, float]:
    """Decode attention on a chip without an engine-measured table: the measured chips' median fixed
    cost (a paged decode-attention kernel costs 5..14 us on every measured chip, not one small
    kernel's launch) and their median ratio of KV-read bandwidth to STREAM, applied to this chip's
    STREAM figure (an assumption); FLOPs at the chip's own measured attention rate."""
    b = _borrowed(key)
    return (b[0], hbm * b[1] * 1e9, attn_flops) if b else (KERNEL_S, hbm * 1e9, attn_flops)


def _gemm_key(precision: str) -> str:
    return "gemm_bf16" if precision in ("bf16", "fp16") else f"gemm_{precision}"


@lru_cache(maxsize=4096)
def _resolve(gpu_name: str, weights: str, kv: str, tp: int, engine_name: str | None, fabric: TrainingFabric) -> Kernels:
    from gpucluster.catalog import catalog
    from gpucluster.model.serving.kv_cache import Quant

    gpu = catalog.gpus.get(gpu_name)
    eng = get_engine(engine_name)
    src = eng.kernel_data
    quant = Quant(weights, kv)
    prec = quant.compute(gpu)
    half_p = "bf16" if "bf16" in gpu.peak_tflops else "fp16"
    gemm = _curve(gpu_name, prec, kernel_fit(gpu_name, src, _gemm_key(prec)))
    half = _curve(gpu_name, half_p, kernel_fit(gpu_name, src, "gemm_bf16"))
    if eng.expert_precision == "bf16" and quant.weights != half_p:
        expert, xwb, xab, xprec = half, _EXPERT_BYTES["bf16"], 2.0, half_p
    else:
        expert, xwb, xab, xprec = gemm, quant.weight_bytes, quant.act_bytes(gpu), prec
    moe = kernel_fit(gpu_name, src, _gemm_key(xprec).replace("gemm_", "moe_"))
    if moe is not None:
        # The engine's fused MoE op as measured: its weight reads run well below a dense GEMM's
        # (H100, TensorRT-LLM, Mixtral shapes: ~1.4 TB/s against 2.8), split over the layer's two
        # grouped GEMMs (each carries half the op's fixed cost).
        expert = GemmCurve(gpu_name, xprec, moe.tflops, 1.0, moe.t0_s / 2, moe.gbps, f"measured: {moe.source}",
                           expert.sms)
    hbm = hbm_gbps(gpu)
    attn = attention_tflops(gpu_name)[0] * 1e12
    att_key = "decode_attention_" + ("fp8" if kv in ("fp8", "int8") else "bf16")
    fit = kernel_fit(gpu_name, src, att_key)
    dec = (fit.t0_s, fit.gbps * 1e9, fit.tflops * 1e12) if fit else _borrowed_attention(att_key, hbm, attn)
    ar = None
    if tp > 1:
        a = kernel_fit(gpu_name, src if eng.custom_allreduce else "nccl", f"allreduce_{tp}") \
            or kernel_fit(gpu_name, "nccl", f"allreduce_{tp}")
        ar = (a.t0_s, a.gbps * 1e9) if a else None
    used = sorted({f.source.split(" ")[-1] for f in (kernel_fit(gpu_name, src, _gemm_key(prec)), fit) if f})
    title = eng.title if engine_name else f"engine not named ({eng.title}'s kernels, fitted host cost)"
    prov = (f"{title}: measured kernels ({', '.join(used)}, aiconfigurator-core 0.12.0)" if used else
            f"{title}: {gpu_name} microbenchmarks (no measured serving kernels for this chip; decode GEMM "
            f"and attention fixed costs and read/STREAM bandwidth ratios borrowed from measured chips: assumption)")
    return Kernels(eng, gemm, half, expert, quant.weight_bytes, quant.act_bytes(gpu), xwb, xab, hbm, dec,
                   (KERNEL_S, hbm * 1e9, attn), ar, 0.0 if eng.cuda_graphs else eng.launch_s,
                   eng.host_step_s if engine_name else None, prov + "; no fitted serving factor", fabric, tp)


def host_step_s(k: Kernels) -> float:
    """The host work per step: the named engine's, else the fitted value (fitted.py, read at call time)."""
    from gpucluster.model.serving import fitted

    return fitted.STEP_HOST_S if k.host_step_s is None else k.host_step_s


def kernels_of(rep: Replica) -> Kernels:
    return _resolve(rep.gpu.name, rep.quant.weights, rep.quant.kv, rep.tp, rep.engine, rep.fabric)

