"""Memory per GPU in training: weights, gradients, optimizer state and activations (bytes).

Weights, gradients and optimizer (Rajbhandari et al. 2020, "ZeRO", section 3.1):
mixed-precision Adam keeps 2 bytes of fp16/bf16 weights, 2 bytes of gradients and
12 bytes of optimizer state (fp32 master weights, Adam m and v) per parameter: 16
bytes. ZeRO stage 1 shards the 12 over the N data-parallel ranks, stage 2 also the
gradients, stage 3 (FSDP full shard) also the weights: 4 + 12/N, 2 + 14/N, 16/N.
- fp8 training (Megatron-LM / Transformer Engine) keeps bf16 weights and the fp32 master
  copy in the optimizer, so it is counted as bf16; the transient fp8 copies of weights
  that Transformer Engine caches during a step are not counted.
- `fp32_grads`: gradients accumulated and reduced in fp32 (4 bytes), which Megatron-LM
  turns on for bf16 (`accumulate_allreduce_grads_in_fp32`); the ZeRO paper's count is 2.
- precision fp32: 4-byte weights and gradients, 8 bytes of Adam state (no master copy).
- Data-parallel sharding runs over dp x cp ranks (Megatron's distributed optimizer uses
  the data-parallel group with context parallelism); expert parameters over dp x cp / ep.

Activations per layer (Korthikanti et al. 2022, section 4, Table 2), for s tokens per
sequence, micro batch b, width h, a heads, 2-byte activations, t = tp:
    no parallelism              s*b*h*(34 + 5*a*s/h)
    tensor parallel             s*b*h*(10 + 24/t + 5*a*s/(h*t))
    tensor + sequence parallel  s*b*h/t*(34 + 5*a*s/h)
    selective recompute         the 5*a*s/h term is gone
    full recompute              2*s*b*h (the layer input; /t with sequence parallelism)
The 34 is, per token, 10*h outside the tensor-parallel region (two norm inputs 4h, the
QKV and fc1 inputs 2h each, two 1-byte dropout masks h each) and 24*h inside it (Q, K, V
2h each, the output-projection input 2h, the GeLU input 8h and fc2 input 8h); 5*a*s is
the softmax output (2), its dropout mask (1) and dropout output (2) per score.

Extension, derived the same way from the tensors each block saves for its backward pass:
- GQA: K and V are 2*g*d bytes each (g kv heads of width d); Q and the output-projection
  input 2*a*d.
- gated MLP: the activation input is the gate and up outputs, 2 * 2*f bytes; fc2 input 2*f.
- MoE layer: the norm output 2h (router and shared-expert input), the k permuted token
  copies 2h*k and the k expert outputs 2h*k (kept for the gate-weight gradient) stay
  outside the TP region, as do the router's fp32 logits and probabilities (8*experts);
  each of the k routed and the shared experts stores its activation and fc2 inputs at
  width moe_ffn_hidden, split by tp. Balanced routing makes this independent of ep.
- MLA: the latent vectors (query down-projection output and its norm, 4*q_lora; key/value
  latent 2*(kv_lora + rope) and its norm 2*kv_lora) are duplicated on TP ranks; Q and K
  are 2*a*(nope + rope) each and V and the output-projection input 2*a*v each.
- flash_attention (default True, as in current Megatron / NeMo / PyTorch stacks): the
  s x s scores are never stored; the kernel keeps the fp32 log-sum-exp, 4*a bytes per
  token, and regenerates its dropout mask. flash_attention=False is Korthikanti's count.
- dropout (default: the spec's `dropout`, itself not gated_mlp by default; Korthikanti's
  models had dropout): the two h-byte masks after attention and MLP, the embedding's, and
  the unfused attention's probability mask and output.
Context parallelism divides the tokens on each GPU by cp (each query still sees all s keys).
"""

from __future__ import annotations

from functools import lru_cache

from typing import Literal

from gpucluster.model.transformer_params import (attention_parts, check_layout, mlp_weights, norm_params,
                                                 stage_layer_counts)
from gpucluster.specs.workload import TransformerSpec

Precision = Literal["fp32", "fp16", "bf16", "fp8"]
Recompute = Literal["none", "selective", "full"]


def _stage_params(spec: TransformerSpec, tp: int, pp: int, ep: int, etp: int | None = None) -> list[tuple[float, float]]:
    """Per pipeline stage: (non-expert, expert) parameters held by one GPU."""
    attn_sh, attn_dup, attn_norms = attention_parts(spec)
    attn = attn_sh / tp + attn_dup + attn_norms
    d_sh, d_rep = mlp_weights(spec, int(spec.ffn_hidden))  # type: ignore[arg-type]
    dense_mlp = d_sh / tp + d_rep + norm_params(spec)
    moe_rest = expert_local = 0.0
    if spec.is_moe:
        e_sh, e_rep = mlp_weights(spec, int(spec.moe_ffn_hidden))  # type: ignore[arg-type]
        shared = e_sh / tp + e_rep
        expert = e_sh / (etp or tp) + e_rep
        moe_rest = spec.shared_experts * shared + spec.hidden * spec.experts + norm_params(spec)
        expert_local = spec.experts // ep * expert
    h, V = spec.hidden, spec.vocab
    embedding = V * h / tp + (spec.seq_len * h if spec.position_embedding == "learned" else 0)
    out, first = [], 0
    for i, n in enumerate(stage_layer_counts(spec.layers, pp)):
        dense_n = max(0, min(n, spec.dense_layers - first)) if spec.is_moe else n
        moe_n = n - dense_n
        non_expert = n * attn + dense_n * dense_mlp + moe_n * moe_rest
        if i == 0:
            non_expert += embedding
        if i == pp - 1:
            # tied embeddings: with pp > 1 Megatron keeps a copy of the word embedding on the
            # last stage for the logits (and all-reduces its gradient with the first stage)
            non_expert += norm_params(spec) + (V * h / tp if not spec.tied_embeddings or pp > 1 else 0)
        out.append((non_expert, moe_n * expert_local))
        first += n
    return out


def weight_grad_optimizer_bytes(spec: TransformerSpec, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1,
                                zero_stage: int = 0, precision: Precision = "bf16", *, cp: int = 1,
                                fp32_grads: bool = False, stage: int | None = None,
                                etp: int | None = None) -> dict[str, float]:
    # A layout search asks for the same terms several times per layout: answer from a cache
    # (a copy, so that a caller's change cannot leak into the next answer).
    return dict(_weight_grad_optimizer_bytes(spec, tp, pp, dp, ep, zero_stage, precision, cp, fp32_grads, stage,
                                             etp or tp))


@lru_cache(maxsize=65536)
def _weight_grad_optimizer_bytes(spec: TransformerSpec, tp: int, pp: int, dp: int, ep: int, zero_stage: int,
                                 precision: Precision, cp: int, fp32_grads: bool,
                                 stage: int | None, etp: int) -> dict[str, float]:
    """Bytes of weights, gradients and optimizer state on one GPU of pipeline stage `stage`
    (default: the stage that needs the most). Keys: weights, grads, optimizer, total (bytes);
    params (parameters this GPU holds before ZeRO sharding) and stage (its index)."""
    check_layout(spec, tp=tp, pp=pp, cp=cp, ep=ep)
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    if (tp * dp * cp) % (ep * etp):
        raise ValueError(f"ep x expert tp ({ep} x {etp}) must divide tp x dp x cp ({tp * dp * cp}): "
                         "expert groups are carved out of the same GPUs")
    if precision == "fp32":
        w_b, g_b, o_b = 4.0, 4.0, 8.0
    elif precision in ("fp16", "bf16", "fp8"):
        w_b, g_b, o_b = 2.0, (4.0 if fp32_grads else 2.0), 12.0
    else:
        raise ValueError(f"precision must be fp32, fp16, bf16 or fp8, got {precision!r}")

    def per_kind(count: float, shards: int) -> tuple[float, float, float]:
        return (count * w_b / (shards if zero_stage >= 3 else 1),
                count * g_b / (shards if zero_stage >= 2 else 1),
                count * o_b / (shards if zero_stage >= 1 else 1))

    if stage is None:
        # The stage that needs the most (the first of equals): stages with the same parameters
        # need the same, so each is worked out at its first stage only (a pipeline of 126 stages
        # has three or four kinds).
        stages = _distinct_stage_params(spec, tp, pp, ep, etp)
    else:
        i = range(pp)[stage]  # IndexError beyond the pipeline, as before; -1: the last stage
        stages = ((i, _stage_params(spec, tp, pp, ep, etp)[i]),)
    rows = []
    for i, (non_expert, expert) in stages:
        a = per_kind(non_expert, dp * cp)
        e = per_kind(expert, tp * dp * cp // (ep * etp))
        w, g, o = a[0] + e[0], a[1] + e[1], a[2] + e[2]
        rows.append({"weights": w, "grads": g, "optimizer": o, "total": w + g + o,
                     "params": non_expert + expert, "stage": float(i)})
    return max(rows, key=lambda r: r["total"])


@lru_cache(maxsize=4096)
def _distinct_stage_params(spec: TransformerSpec, tp: int, pp: int, ep: int,
                           etp: int) -> tuple[tuple[int, tuple[float, float]], ...]:
    """(first stage, its _stage_params) of each different pair, in stage order; it does not depend
    on dp, cp, ZeRO or precision, which a layout search varies most."""
    seen: set[tuple[float, float]] = set()
    out = []
    for i, pair in enumerate(_stage_params(spec, tp, pp, ep, etp)):
        if pair not in seen:
            seen.add(pair)
            out.append((i, pair))
    return tuple(out)


def _activation_terms(spec: TransformerSpec, moe_layer: bool, flash: bool, dropout: bool,
                      keys: int) -> tuple[float, float, float]:
    """Bytes per token of one layer: (outside the TP region, inside it, attention scores)."""
    h, a = spec.hidden, spec.heads
    mask = h if dropout else 0
    outside = 4 * h + 2 * h + mask          # two norm inputs; attention input; attention dropout mask
    if spec.attention == "mla":
        if spec.q_lora_rank:
            outside += 4 * int(spec.q_lora_rank)
        kv_lora, rope = int(spec.kv_lora_rank), int(spec.qk_rope_head_dim)  # type: ignore[arg-type]
        outside += 2 * (kv_lora + rope) + 2 * kv_lora
        inside = 2 * a * spec.qk_head_dim * 2 + 2 * a * spec.v_dim * 2
    else:
        q, kv = a * spec.head_dim, int(spec.kv_heads) * spec.head_dim  # type: ignore[operator,arg-type]
        inside = 2 * q + 2 * kv + 2 * kv + 2 * q
    act = 4 if spec.gated_mlp else 2        # bytes per inner-width element of the activation's input
    if moe_layer:
        k = spec.experts_per_token
        fe = int(spec.moe_ffn_hidden)  # type: ignore[arg-type]
        outside += 2 * h + 4 * h * k + 8 * spec.experts + mask
        inside += (k + spec.shared_experts) * (act * fe + 2 * fe)
    else:
        f = int(spec.ffn_hidden)  # type: ignore[arg-type]
        outside += 2 * h + mask
        inside += act * f + 2 * f
    # Unfused: the softmax output (2 bytes per score), and with dropout its mask (1) and output (2).
    scores = 4 * a if flash else (5 if dropout else 2) * a * keys
    return outside, inside, scores


def activation_bytes_per_layer(spec: TransformerSpec, micro_batch: int, tp: int = 1, sp: bool = False,
                               recompute: Recompute = "none", cp: int = 1, *, seq_len: int | None = None,
                               flash_attention: bool = True, dropout: bool | None = None,
                               dense_layer: bool | None = None) -> float:
    """Activation bytes one layer keeps for its backward pass, for one micro batch, on one GPU.

    `dense_layer` picks the layer type of an MoE spec (default: an MoE layer)."""
    s = seq_len or spec.seq_len
    check_layout(spec, tp=tp, cp=cp, seq_len=s)
    tokens = micro_batch * s / cp
    sp_div = tp if sp else 1
    if recompute == "full":
        return 2 * spec.hidden * tokens / sp_div
    moe_layer = spec.is_moe if dense_layer is None else not dense_layer
    outside, inside, scores = _activation_terms(spec, moe_layer, flash_attention,
                                                bool(spec.dropout) if dropout is None else dropout, s)
    total = tokens * (outside / sp_div + inside / tp)
    if recompute == "none":
        total += tokens * scores / tp
    elif recompute != "selective":
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    return total


def activation_bytes_outside_layers(spec: TransformerSpec, micro_batch: int, tp: int = 1, sp: bool = False,
                                    cp: int = 1, *, seq_len: int | None = None,
                                    dropout: bool | None = None) -> dict[str, float]:
    """Activations of the first stage's embedding and the last stage's output layer, per micro batch.

    Korthikanti et al. 2022 section 4.3: the embedding dropout mask s*b*h, and for the output
    layer 4*s*b*h/t*(1 + V/h): the final norm and logits inputs (2*s*b*h each; split by t with
    sequence parallelism) and the fp32 logits the vocab-parallel cross entropy keeps (4*s*b*V/t)."""
    s = seq_len or spec.seq_len
    tokens = micro_batch * s / cp
    sp_div = tp if sp else 1
    h = spec.hidden
    dropout = spec.dropout if dropout is None else dropout
    return {"first": tokens * (h if dropout else 0) / sp_div,
            "last": tokens * (4 * h / sp_div + 4 * spec.vocab / tp)}


def pipeline_inflight_microbatches(pp: int, interleave: int = 1, stage: int = 0,
                                   num_microbatches: int | None = None) -> float:
    """Micro batches whose activations a pipeline stage holds at its peak, in units of one micro
    batch through all of the stage's layers (multiply by layers/pp x activation_bytes_per_layer).

    1F1B (Narayanan et al. 2021): stage i (0 = first) runs pp - i forward passes before its
    first backward. Interleaved with v = interleave model chunks per GPU (Megatron-LM's
    schedule): (pp - i - 1)*2 + (v - 1)*pp warm-up chunk passes plus one, each chunk being
    1/v of the stage's layers; for the first stage that is pp*(1 + (pp-1)/(pp*v)) micro
    batches, Korthikanti et al. 2022's factor. Capped by the number of micro batches."""
    if not 0 <= stage < pp:
        raise ValueError(f"stage must be in 0..{pp - 1}, got {stage}")
    if interleave <= 1:
        inflight = float(pp - stage)
        return min(inflight, num_microbatches) if num_microbatches else inflight
    chunks = (pp - stage - 1) * 2 + (interleave - 1) * pp + 1
    if num_microbatches:
        chunks = min(chunks, num_microbatches * interleave)
    return chunks / interleave
