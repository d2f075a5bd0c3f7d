"""Transformer inference on CPU sockets, for the small-model question (CPU or GPU?).

A forward pass on a CPU node is a smooth roofline of its FLOPs at the sockets' FP32 FMA
peak (catalog: cores x boost clock x FLOP/cycle) times CPU_GEMM_EFFICIENCY, and of the
bytes it reads (FP32 weights once per forward, the KV cache) at the sockets' DRAM
bandwidth times CPU_BW_EFFICIENCY, plus a fixed framework cost per forward.

- CPU_GEMM_EFFICIENCY = 0.5 (estimate): oneDNN/MKL FP32 GEMMs reach 70-90% of the
  AVX-512/AVX2 FMA peak on large shapes; end-to-end transformer inference (per-request
  matrices of a few hundred rows, attention, softmax, norms, threads spread over two
  sockets) runs at about half of peak.
- CPU_BW_EFFICIENCY = 0.75 (estimate): STREAM triad on DDR5 server sockets reaches
  70-80% of the channels x MT/s x 8 bytes peak.
- CPU_FORWARD_OVERHEAD_S = 0.2 ms (estimate): framework dispatch and thread wake-up per
  forward pass (PyTorch / ONNX Runtime on a many-core socket).

`CpuStepModel` has the interface of queueing.StepModel, so the same continuous-batching
model gives its throughput and latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpucluster.catalog.models import Cpu
from gpucluster.model.serving.kv_cache import kv_bytes_per_token
from gpucluster.model.transformer_params import params
from gpucluster.specs.workload import TransformerSpec

CPU_GEMM_EFFICIENCY = 0.5
CPU_BW_EFFICIENCY = 0.75
CPU_FORWARD_OVERHEAD_S = 2e-4
FP32_BYTES = 4.0


class CpuStepModel:
    """Forward-pass times of `spec` on one node of `sockets` CPUs (FP32 weights and KV)."""

    def __init__(self, spec: TransformerSpec, cpu: Cpu, sockets: int = 2) -> None:
        self.spec, self.cpu, self.sockets = spec, cpu, sockets
        p = params(spec)
        self.body = p.active - p.embedding - p.logits       # parameters every token multiplies
        self.head = p.logits or spec.vocab * spec.hidden     # the output layer (tied: the embedding)
        self.flops_rate = cpu.peak_fp32_tflops.value * 1e12 * sockets * CPU_GEMM_EFFICIENCY
        self.bytes_rate = cpu.memory_bandwidth_gbps.value * 1e9 * sockets * CPU_BW_EFFICIENCY
        self.kv_token = kv_bytes_per_token(spec, "fp16") * FP32_BYTES / 2

    def _forward(self, tokens: float, sequences: float, keys: float) -> float:
        s = self.spec
        flops = 2 * self.body * tokens + 2 * self.head * sequences
        flops += 2 * tokens * s.layers * s.heads * keys * (s.qk_head_dim + s.v_dim)
        read = (self.body + self.head) * FP32_BYTES + sequences * keys * self.kv_token
        return math.hypot(flops / self.flops_rate, read / self.bytes_rate) + CPU_FORWARD_OVERHEAD_S

    def prefill(self, k: float, tokens: float) -> float:
        if k <= 0:
            return 0.0
        if k < 1:
            return k * self.prefill(1, tokens)
        return self._forward(k * tokens, k, tokens)   # bidirectional or causal: s keys per query

    def prefills(self, tokens: list[float]) -> list[float]:
        """One prompt's prefill at each of these lengths."""
        return [self.prefill(1, t) for t in tokens]

    def prefiller(self, tokens: float) -> Callable[[float], float]:
        return lambda k: self.prefill(k, tokens)

    def decoder(self, ctx: float) -> Callable[[float], float]:
        return lambda n: self.decode(n, ctx)

    def decode(self, n: float, ctx: float) -> float:
        if n <= 0:
            return 0.0
        return self._forward(n, n, ctx)
