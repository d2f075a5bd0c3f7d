"""FLOPs of a training iteration, and the GEMMs of one layer on one GPU.

Model FLOPs follow Megatron-LM's `num_floating_point_operations`
(megatron/training/training.py; Narayanan et al. 2021, appendix "Floating-point
operation accounting"): every GEMM runs 3 times (forward, backward data-gradient,
backward weight-gradient), a GEMM of (m x k) by (k x n) costs 2*m*n*k, and per token
and layer the forward pass does

    attention  4*h*(a*d) + 4*h*(g*d)  [Q and output, K and V projections; g = kv heads]
             + 4*s*(a*d)              [Q.K^T and scores x V, the full s x s matrix]
    MLP      4*h*f  (x 3/2 when gated: SwiGLU's third matrix)
    MoE MLP  4*h*f_e*(top_k + shared_experts)  (x 3/2 when gated)
    logits   2*h*V  (once, after the last layer)

which is Megatron's 12*B*s*L*h^2*((1 + g/a + s/h)*(a*d/h) + f/h*3/2 + V/(2*L*h)). The
2024 versions of the function count the full s x s attention; later ones (2025) halve
the s^2 terms for causal masking ("only half of the attention matrix is non-zero"):
`causal=True` gives that. The default (full) is what the validation sources use: for a
GPT model (a*d = h, g = a, f = 4h, not gated) it equals Korthikanti et al. 2022 and
Narayanan et al. 2021's 72*B*s*L*h^2*(1 + s/(6h) + V/(12*L*h)) exactly.

MLA (DeepSeek-V3) counts its real projections (query down/up, joint key/value down,
key/value up, output) and the attention core with qk = nope + rope and v head widths,
as Megatron's MLA branch does less its two latent norms (~q_lora + kv_lora FLOPs per
token and layer, negligible). Megatron leaves the MoE router out; `include_router=True`
adds its 2*h*experts per token and MoE layer. Norms, softmax, activations and the
optimizer are not counted (they are not GEMMs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucluster.model.transformer_params import check_layout
from gpucluster.specs.workload import TransformerSpec, filled

Recompute = Literal["none", "selective", "full"]


def _core_macs_per_token(spec: TransformerSpec, s: int, causal: bool) -> float:
    """Multiply-accumulates of Q.K^T and scores x V for one query token in one layer."""
    return spec.heads * s * (spec.qk_head_dim + spec.v_dim) * (0.5 if causal else 1.0)


def _mla_linear_macs_per_token(spec: TransformerSpec) -> float:
    h, a, qk, v = spec.hidden, spec.heads, spec.qk_head_dim, spec.v_dim
    kv_lora, rope = int(spec.kv_lora_rank), int(spec.qk_rope_head_dim)  # type: ignore[arg-type]
    q = spec.q_lora_rank * (h + a * qk) if spec.q_lora_rank else h * a * qk
    kv = h * (kv_lora + rope) + kv_lora * a * (int(spec.qk_nope_head_dim) + v)  # type: ignore[arg-type]
    return q + kv + a * v * h


def model_flops_per_iteration(spec: TransformerSpec, global_batch: int, seq_len: int | None = None, *,
                              causal: bool = False, include_router: bool = False) -> float:
    """Model FLOPs of one optimizer step (forward + backward, no recompute) on `global_batch`
    sequences of `seq_len` tokens (default the spec's), as Megatron-LM counts them."""
    s = seq_len or spec.seq_len
    B, h, L, V = global_batch, spec.hidden, spec.layers, spec.vocab
    gated = 1.5 if spec.gated_mlp else 1.0
    expansion = 3 * 2 * 2   # 3 passes x 2 GEMMs per block x 2 FLOPs per multiply-accumulate
    moe, dense = spec.moe_layers, spec.layers - spec.moe_layers
    if spec.attention == "mla":
        self_attn = 3 * 2 * L * (_mla_linear_macs_per_token(spec) + _core_macs_per_token(spec, s, causal))
    else:
        a, g, d = spec.heads, filled(spec.kv_heads), filled(spec.head_dim)
        q_ratio = a * d / h
        self_attn = expansion * L * h * h * ((1 + g / a + (s / h / 2 if causal else s / h)) * q_ratio)
    k = spec.experts_per_token if spec.is_moe else 0
    f, fe = int(spec.ffn_hidden), int(spec.moe_ffn_hidden)  # type: ignore[arg-type]
    mlp = expansion * h * (f * gated * dense + fe * (k + spec.shared_experts) * gated * moe)
    router = 3 * 2 * h * spec.experts * moe if include_router else 0
    logits = 3 * 2 * h * V
    return float(B * s * (mlp + self_attn + router + logits))


def hardware_flops_per_iteration(spec: TransformerSpec, global_batch: int, recompute: Recompute = "none",
                                 seq_len: int | None = None, *, causal: bool = False,
                                 include_router: bool = False) -> float:
    """FLOPs the GPUs execute, recompute included (Korthikanti et al. 2022, section 6.1).

    full: every transformer layer's forward runs twice (4 passes instead of 3, 72 -> 96 in
    Korthikanti's 96*B*s*L*h^2*(1 + s/(6h) + V/(16*L*h))); the logits are not recomputed.
    selective: the attention core (Q.K^T, softmax, dropout, scores x V) runs again in the
    backward pass: one more forward of the s^2 GEMMs.
    """
    s = seq_len or spec.seq_len
    model = model_flops_per_iteration(spec, global_batch, s, causal=causal, include_router=include_router)
    if recompute == "none":
        return model
    if recompute == "full":
        logits = 3 * 2 * spec.hidden * spec.vocab * global_batch * s
        return model + (model - logits) / 3
    if recompute == "selective":
        return model + 2 * global_batch * s * spec.layers * _core_macs_per_token(spec, s, causal)
    raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")


def model_flops_per_token(spec: TransformerSpec, seq_len: int | None = None, *, causal: bool = False) -> float:
    """Training FLOPs per token (forward + backward); ~6 x active params + attention."""
    s = seq_len or spec.seq_len
    return model_flops_per_iteration(spec, 1, s, causal=causal) / s


# --- GEMMs of one layer on one GPU --------------------------------------------------------------

@dataclass(frozen=True)
class Gemm:
    """`count` independent (m x k) @ (k x n) products. Dimensions are floats only where balanced
    MoE routing gives a fractional token count per expert."""
    name: str
    m: float
    n: float
    k: float
    count: int = 1
    kind: Literal["linear", "attention"] = "linear"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count


def layer_gemms(spec: TransformerSpec, micro_batch: int, tp: int = 1, cp: int = 1, sp: bool = False,
                ep: int = 1, seq_len: int | None = None, *, dense_layer: bool | None = None,
                causal: bool = False, etp: int | None = None) -> list[Gemm]:
    """The GEMMs of one transformer layer's forward pass on one GPU of a TP x CP (x EP) group.

    Megatron-LM's layout: column-parallel QKV / fc1 and row-parallel output / fc2 split the
    weights over `tp`; every TP rank multiplies all the micro batch's tokens (with sequence
    parallelism they are all-gathered first, so `sp` changes communication and memory,
    not these shapes, except those of the replicated GEMMs below: the MoE router and MLA's
    down-projections see only the rank's own 1/tp of the tokens). Context
    parallelism gives each GPU seq_len/cp query tokens attending over all seq_len keys.
    Attention GEMMs are batched per head: count = heads/tp x micro_batch. Experts are split
    over `etp` ranks (default tp). `causal` halves
    the keys each query sees on average (flash attention skips the masked blocks).

    MoE layers (all layers of an MoE spec past `dense_layers`; `dense_layer` overrides):
    balanced routing sends tokens*top_k*ep/experts tokens to each expert (the `ep` ranks
    pool their tokens through the all-to-all), and each GPU holds experts/ep experts, each
    split over tp ranks (Megatron's expert tensor parallelism = tp). Shared experts run as
    one MLP of width shared_experts*moe_ffn_hidden on all tokens. MLA down-projections are
    duplicated linears in Megatron-Core: with sequence parallelism each TP rank runs them on
    its own 1/tp of the tokens and all-gathers the small latent; without it every TP rank
    runs them on all tokens (redundant work, counted on each).
    """
    s = seq_len or spec.seq_len
    check_layout(spec, tp=tp, cp=cp, ep=ep, seq_len=s)
    b, h, a = micro_batch, spec.hidden, spec.heads
    tokens = b * s // cp
    local_tokens = tokens / tp if sp else tokens   # inputs of replicated GEMMs (router, MLA down)
    keys = s / 2 if causal else s
    heads_per_gpu = a // tp
    out: list[Gemm] = []
    if spec.attention == "mla":
        qk, v, nope = spec.qk_head_dim, spec.v_dim, int(spec.qk_nope_head_dim)  # type: ignore[arg-type]
        kv_lora, rope = int(spec.kv_lora_rank), int(spec.qk_rope_head_dim)  # type: ignore[arg-type]
        if spec.q_lora_rank:
            out += [Gemm("q_down", local_tokens, spec.q_lora_rank, h),
                    Gemm("q_up", tokens, heads_per_gpu * qk, spec.q_lora_rank)]
        else:
            out.append(Gemm("q_proj", tokens, heads_per_gpu * qk, h))
        out += [Gemm("kv_down", local_tokens, kv_lora + rope, h),
                Gemm("kv_up", tokens, heads_per_gpu * (nope + v), kv_lora)]
    else:
        qk = v = spec.head_dim  # type: ignore[assignment]
        g = int(spec.kv_heads)  # type: ignore[arg-type]
        out.append(Gemm("qkv", tokens, (a + 2 * g) * qk // tp, h))
    out += [Gemm("attn_scores", s // cp, keys, qk, heads_per_gpu * b, "attention"),
            Gemm("attn_context", s // cp, v, keys, heads_per_gpu * b, "attention"),
            Gemm("attn_out", tokens, h, heads_per_gpu * v)]
    is_dense = (not spec.is_moe) if dense_layer is None else dense_layer
    fc1_mult = 2 if spec.gated_mlp else 1
    if is_dense:
        f = int(spec.ffn_hidden)  # type: ignore[arg-type]
        out += [Gemm("mlp_fc1", tokens, fc1_mult * f // tp, h), Gemm("mlp_fc2", tokens, h, f // tp)]
        return out
    fe = int(spec.moe_ffn_hidden)  # type: ignore[arg-type]
    out.append(Gemm("router", local_tokens, spec.experts, h))
    if spec.shared_experts:
        fs = spec.shared_experts * fe
        out += [Gemm("shared_fc1", tokens, fc1_mult * fs // tp, h), Gemm("shared_fc2", tokens, h, fs // tp)]
    # Experts are split over `etp` ranks (Megatron's --expert-tensor-parallel-size, default tp);
    # with etp < tp (MoE parallel folding) each expert rank sees tp / etp ranks' tokens.
    e_tp = etp or tp
    per_expert = tokens * spec.experts_per_token * ep / spec.experts * (tp // e_tp if sp else 1)
    local = spec.experts // ep
    out += [Gemm("expert_fc1", per_expert, fc1_mult * fe // e_tp, h, local),
            Gemm("expert_fc2", per_expert, h, fe // e_tp, local)]
    return out


def logit_gemm(spec: TransformerSpec, micro_batch: int, tp: int = 1, cp: int = 1,
               seq_len: int | None = None) -> Gemm:
    """The output layer on one GPU: vocab-parallel over tp (V/tp columns each; Megatron pads
    V to a multiple of 128*tp, see `padded_vocab`, which this does not apply)."""
    s = seq_len or spec.seq_len
    return Gemm("logits", micro_batch * s // cp, spec.vocab / tp, spec.hidden)


def padded_vocab(vocab: int, tp: int = 1, multiple: int = 128) -> int:
    """Megatron-LM's `--make-vocab-size-divisible-by` padding (default 128, times tp)."""
    step = multiple * tp
    return -(-vocab // step) * step
