"""Memory of one serving replica: weights, KV cache and how many sequences fit (bytes).

Precisions (`Quant`):
- weights bf16/fp16: 2 bytes per parameter; fp8 and int8: 1 byte (per-channel or per-tensor
  scales, negligible); int4 (AWQ/GPTQ, group size 128 with an fp16 scale per group, Lin et
  al. 2023): 0.5 + 2/128 bytes; fp4 (NVFP4: 4-bit values and one fp8 scale per block of
  16): 0.5 + 1/16 bytes.
- The GEMMs run at the weights' precision where the chip has tensor cores for it (fp8 on
  Hopper/Blackwell/MI300, int8 W8A8, fp4 on Blackwell); otherwise the weights are
  de-quantized in the kernel and the math runs in bf16 (weight-only kernels such as
  Marlin). int4 is weight-only (W4A16, compute at bf16), the common AWQ/GPTQ path.
- The input embedding and the output layer (lm_head) stay in 16 bits: TensorRT Model
  Optimizer's default FP8/INT4 recipes and AutoAWQ exclude `lm_head` from quantization.

KV cache per token (keys and values of every layer):
    MHA/GQA/MQA  2 x layers x kv_heads x head_dim x bytes(kv precision)
    MLA          layers x (kv_lora_rank + qk_rope_head_dim) x bytes   (the compressed
                 latent and the shared rotary key, DeepSeek-V2 section 2.1.3)
Per GPU of a TP group each rank holds kv_heads / tp heads, and one whole head when
tp > kv_heads (vLLM and TensorRT-LLM replicate KV heads then); the MLA latent is held
in full on every TP rank. Pipeline stages hold their own layers.

Sequences that fit = (HBM x usable fraction - weights - activation workspace) / (KV per
token x context length). The usable fraction is 0.90, the default of vLLM's
`gpu_memory_utilization` and of TensorRT-LLM's `kv_cache_free_gpu_mem_fraction`; the 10%
left covers the CUDA context, NCCL buffers and CUDA graphs.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.models import Gpu
from gpucluster.model.transformer_params import (attention_parts, mlp_weights, norm_params, params,
                                                 stage_layer_counts)
from gpucluster.specs.workload import TransformerSpec, filled

WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 2 / 128, "fp4": 0.5 + 1 / 16}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
USABLE_FRACTION = 0.90
# vLLM profiles activation memory with a forward pass of max_num_batched_tokens tokens
# (8192 is its default with chunked prefill); TensorRT-LLM's max_num_tokens default is 8192 too.
WORKSPACE_TOKENS = 8192


@dataclass(frozen=True)
class Quant:
    """Serving precisions: weights, KV cache, and the GEMMs' math (derived per chip)."""
    weights: str = "bf16"
    kv: str = "bf16"

    def __post_init__(self) -> None:
        if self.weights not in WEIGHT_BYTES:
            raise ValueError(f"weight precision must be one of {', '.join(WEIGHT_BYTES)}, got {self.weights!r}")
        if self.kv not in KV_BYTES:
            raise ValueError(f"KV precision must be one of {', '.join(KV_BYTES)}, got {self.kv!r}")

    @property
    def weight_bytes(self) -> float:
        return WEIGHT_BYTES[self.weights]

    @property
    def kv_bytes(self) -> float:
        return KV_BYTES[self.kv]

    def compute(self, gpu: Gpu) -> str:
        """Precision of the GEMMs' math on `gpu` (see the module docstring)."""
        half = "bf16" if "bf16" in gpu.peak_tflops else "fp16"
        if self.weights in ("fp8", "int8", "fp4") and self.weights in gpu.peak_tflops:
            return self.weights
        if self.weights == "fp16" and "fp16" in gpu.peak_tflops:
            return "fp16"
        return half

    def act_bytes(self, gpu: Gpu) -> float:
        """Bytes of a GEMM input activation element (8-bit math reads 8-bit inputs)."""
        return {"fp8": 1.0, "int8": 1.0, "fp4": 0.5625}.get(self.compute(gpu), 2.0)


def kv_bytes_per_token(spec: TransformerSpec, kv: str = "bf16") -> float:
    """KV-cache bytes one token adds over the whole model (all layers, all heads)."""
    b = KV_BYTES[kv]
    if spec.attention == "mla":
        return spec.layers * (int(spec.kv_lora_rank) + int(spec.qk_rope_head_dim)) * b  # type: ignore[arg-type]
    return 2 * spec.layers * filled(spec.kv_heads) * filled(spec.head_dim) * b


def kv_heads_per_gpu(spec: TransformerSpec, tp: int) -> float:
    """KV heads one TP rank holds (a whole replicated head when tp > kv_heads; MLA: the latent)."""
    if spec.attention == "mla":
        return 1.0
    return max(1.0, int(spec.kv_heads) / tp)  # type: ignore[arg-type]


def kv_bytes_per_token_per_gpu(spec: TransformerSpec, tp: int = 1, pp: int = 1, kv: str = "bf16") -> float:
    """KV-cache bytes per token on the GPU of the fullest pipeline stage."""
    layers = max(stage_layer_counts(spec.layers, pp))
    b = KV_BYTES[kv]
    if spec.attention == "mla":
        return layers * (int(spec.kv_lora_rank) + int(spec.qk_rope_head_dim)) * b  # type: ignore[arg-type]
    return 2 * layers * kv_heads_per_gpu(spec, tp) * filled(spec.head_dim) * b


def layer_weight_params(spec: TransformerSpec, tp: int, moe: bool) -> float:
    """Parameters of one layer on one TP rank: sharded linears / tp, plus the replicated parts."""
    sharded, dup, norms = attention_parts(spec)
    if moe:
        fe = int(spec.moe_ffn_hidden)  # type: ignore[arg-type]
        e_sh, e_rep = mlp_weights(spec, fe)
        n = spec.experts + spec.shared_experts
        sharded += n * e_sh
        dup += n * e_rep + spec.hidden * spec.experts
    else:
        m_sh, m_rep = mlp_weights(spec, int(spec.ffn_hidden))  # type: ignore[arg-type]
        sharded += m_sh
        dup += m_rep
    return sharded / tp + dup + norms + norm_params(spec)


def weight_bytes_per_gpu(spec: TransformerSpec, quant: Quant, tp: int = 1, pp: int = 1) -> float:
    """Weight bytes on the GPU of the fullest pipeline stage (embedding on the first stage,
    output layer on the last, both vocab-parallel over tp and kept in 16 bits)."""
    p = params(spec)
    dense_w = layer_weight_params(spec, tp, False) * quant.weight_bytes
    moe_w = layer_weight_params(spec, tp, True) * quant.weight_bytes if spec.is_moe else 0.0
    counts = stage_layer_counts(spec.layers, pp)
    dense_left = spec.layers - spec.moe_layers
    stages = []
    for i, n in enumerate(counts):
        d = min(n, dense_left)
        dense_left -= d
        w = d * dense_w + (n - d) * moe_w
        if i == 0:
            w += p.embedding / tp * 2
        if i == pp - 1:
            w += (p.logits / tp + p.final_norm) * 2
        stages.append(w)
    return max(stages)


def workspace_bytes(spec: TransformerSpec, tp: int, tokens: int = WORKSPACE_TOKENS) -> float:
    """Activation workspace of one forward pass over `tokens` tokens (2-byte activations): the
    residual stream and norm output (4h), the local QKV output, and the MLP's fc1 output and
    activation (3 f/tp) alive at once; the largest layer's intermediates, not all layers'."""
    f = filled(spec.moe_ffn_hidden) * (spec.experts_per_token + spec.shared_experts) if spec.is_moe \
        else filled(spec.ffn_hidden)
    qkv = (spec.heads * spec.qk_head_dim + 2 * filled(spec.kv_heads) * filled(spec.head_dim)) / tp
    return tokens * 2 * (4 * spec.hidden + qkv + 3 * f / tp)


@dataclass(frozen=True)
class ReplicaMemory:
    capacity: float          # HBM of one GPU
    usable: float            # capacity x USABLE_FRACTION
    weights: float           # per GPU (fullest stage)
    workspace: float         # activations of one forward pass
    kv_per_token: float      # per GPU
    context: int             # tokens one sequence holds at most (input + output)

    @property
    def kv_budget(self) -> float:
        return max(0.0, self.usable - self.weights - self.workspace)

    @property
    def kv_per_sequence(self) -> float:
        return self.kv_per_token * self.context

    @property
    def max_sequences(self) -> int:
        """Concurrent sequences whose KV cache fits (0: not even one)."""
        return int(self.kv_budget // self.kv_per_sequence) if self.kv_per_sequence > 0 else 0

    @property
    def fits(self) -> bool:
        return self.max_sequences >= 1

    def needed_for(self, sequences: int) -> float:
        """Bytes per GPU that `sequences` concurrent sequences need in all."""
        return self.weights + self.workspace + sequences * self.kv_per_sequence


def replica_memory(spec: TransformerSpec, gpu: Gpu, quant: Quant, tp: int, pp: int, context: int) -> ReplicaMemory:
    return ReplicaMemory(capacity=gpu.hbm_bytes, usable=gpu.hbm_bytes * USABLE_FRACTION,
                         weights=weight_bytes_per_gpu(spec, quant, tp, pp), workspace=workspace_bytes(spec, tp),
                         kv_per_token=kv_bytes_per_token_per_gpu(spec, tp, pp, quant.kv), context=context)
