"""The expert GEMMs of one MoE layer as the grouped kernel runs them, and why small experts run slower.

Megatron-Core (`--moe-grouped-gemm`, Transformer Engine / CUTLASS grouped GEMM), NeMo and DeepSeek's
DeepGEMM (m-grouped) launch one kernel for all of a GPU's local experts: every expert's output tiles
share the SMs' waves, and the kernel is launched once. What still costs a small expert (a 768-wide
Qwen3-30B-A3B or DeepSeek fine-grained expert against a 14,336-wide Mixtral one), from the kernel's
own structure and the chip's measured GEMM curve (compute.GemmCurve):

- its m = tokens x top-k x ep / experts rows are padded to whole row tiles (128; 64 below 64 rows,
  DeepGEMM's small-m block), so a few hundred tokens per expert waste a share of every tile;
- each expert reads its whole weight matrix whatever its m: with small m and small n the kernel is
  bound by HBM (the roofline term of the curve, per expert);
- the weight gradient reduces over the expert's m tokens and writes a k x n gradient per expert in
  fp32 (main_grad accumulation), again bytes against few FLOPs;
- the last wave of tiles is partly empty (wave quantization over all experts' tiles together).

Sequential experts (Megatron's SequentialMLP, `grouped=False`) launch one GEMM per expert, each
with its own launch cost and its own partly empty wave.
"""

from __future__ import annotations

import math

from gpucluster.model.training.compute import ELEMENT_BYTES, TILE, GemmCurve

GRAD_BYTES = 4   # weight gradients accumulate in fp32 (Megatron main_grad)
SMALL_M_TILE = 64  # row tile of grouped kernels for experts with <= 64 rows (DeepGEMM BLOCK_M 64)


def _tile_m(m: float) -> int:
    return SMALL_M_TILE if m <= SMALL_M_TILE else TILE


def grouped_time_s(curve: GemmCurve, m: float, n: float, k: float, groups: float, out_bytes: float | None = None
                   ) -> float:
    """One grouped kernel of `groups` independent (m x k) @ (k x n) products (m per group, may be fractional)."""
    if groups <= 0 or m <= 0:
        return curve.t0_s
    tm = _tile_m(m)
    row_tiles = math.ceil(m / tm)
    m_pad = row_tiles * tm
    tiles = groups * row_tiles * math.ceil(n / TILE)
    wave = math.ceil(tiles / curve.sms) * curve.sms / tiles if curve.sms else 1.0
    t_flops = groups * 2.0 * m_pad * n * k * wave / (curve.peak_tflops * 1e12 * curve.eff_max)
    b = ELEMENT_BYTES.get(curve.precision, 2)
    nbytes = groups * ((m * k + k * n) * b + m * n * (out_bytes if out_bytes is not None else b))
    t_bytes = nbytes / (curve.hbm_gbps * 1e9)
    return math.hypot(t_flops, t_bytes) + curve.t0_s


def expert_gemm_s(curve: GemmCurve, m: float, n: float, k: float, experts: int, imbalance: float = 1.0,
                  grouped: bool = True) -> tuple[float, float, int]:
    """(forward s, backward s, kernels) of one expert projection on the busiest GPU: `experts` local experts
    of m tokens each (x imbalance: the busiest rank's share over the mean), (m x k) @ (k x n)."""
    m = m * imbalance
    if not grouped:
        fwd = curve.time_s(m, n, k, experts)
        return fwd, 2 * fwd, experts
    fwd = grouped_time_s(curve, m, n, k, experts)
    dgrad = grouped_time_s(curve, m, k, n, experts)                       # dX = dY W^T: m x k, reduce over n
    wgrad = grouped_time_s(curve, k, n, m, experts, out_bytes=GRAD_BYTES)  # dW = X^T dY: k x n, reduce over m
    return fwd, dgrad + wgrad, 1


def permute_bytes(routed_rows: float, top_k: int, hidden: int, act_bytes: float = 2.0) -> float:
    """HBM bytes of the forward token permutation around the experts (Megatron-Core moe_permute /
    moe_unpermute, memory-bound): gather each token's top-k copies into expert order (read and write
    `routed_rows` rows), and after the experts read them back and write their weighted sum per token."""
    tokens = routed_rows / max(top_k, 1)
    return (2 * routed_rows + routed_rows + tokens) * hidden * act_bytes


def efficiency(curve: GemmCurve, m: float, n: float, k: float, experts: int) -> float:
    """Achieved fraction of the chip's peak for one grouped expert projection's forward (for reports, tests)."""
    t = grouped_time_s(curve, m, n, k, experts)
    return experts * 2.0 * m * n * k / t / (curve.peak_tflops * 1e12)
