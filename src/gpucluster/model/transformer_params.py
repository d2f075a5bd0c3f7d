"""Parameter counts of a `TransformerSpec`, and the layout rules the other transformer modules share.

What is counted (matching how the publishers count; see tests/model/test_transformer.py):
- embedding: V x h token embeddings, plus seq_len x h learned position embeddings
  (`position_embedding: learned`, GPT-2/3 and Megatron GPT); RoPE and ALiBi have none.
- attention (per layer): Q, K, V and output projections (MHA/GQA/MQA: h*(a*d) + 2*h*(g*d)
  + (a*d)*h), their biases when `bias`, and the pre-attention norm. MLA (DeepSeek-V2/V3):
  the query down/up projections (or a single query projection without q_lora_rank), the
  joint key/value down-projection h -> kv_lora_rank + qk_rope_head_dim, the key/value
  up-projection kv_lora_rank -> a*(qk_nope + v), the output projection a*v -> h, and the
  two latent RMSNorms.
- MLP: 2 matrices (h x f and f x h), or 3 when gated (gate, up, down); fc1/fc2 biases
  when `bias`; the pre-MLP norm. A MoE layer holds `experts` routed experts and
  `shared_experts` shared experts of width moe_ffn_hidden, a router h x experts (no bias)
  and the norm.
- norms: LayerNorm has a weight and a bias (h each) when `bias`, else a weight only;
  RMSNorm a weight only. One final norm before the logits.
- logits: h x V, absent when `tied_embeddings` (the input embedding is reused).
- active (per token): everything except the routed experts a token does not use, i.e. the
  embedding and logits, every attention and dense MLP, and per MoE layer the router, the
  shared experts and top-k routed experts (how Mixtral's 12.9B and DeepSeek-V3's 37B are counted).
Not counted: DeepSeek-V3's multi-token-prediction module, the MoE router's load-balancing
bias (a buffer, not a trained weight), rotary frequencies.
"""

from __future__ import annotations

import re

from dataclasses import asdict, dataclass
from functools import lru_cache

from gpucluster.errors import UserError
from gpucluster.specs.workload import TransformerSpec


@dataclass(frozen=True)
class Params:
    """Parameter counts (numbers of parameters, not bytes)."""
    embedding: int          # token (+ learned position) embeddings
    attention: int          # one layer's attention block, incl. its norm and biases
    mlp_dense: int          # one dense layer's MLP block, incl. its norm and biases
    expert: int             # one expert's MLP (routed or shared); 0 for a dense model
    router: int             # one MoE layer's router; 0 for a dense model
    mlp_moe: int            # one MoE layer's whole MLP block: all experts, router, norm; 0 if dense
    mlp_moe_active: int     # the part of mlp_moe one token uses: top-k + shared experts, router, norm
    final_norm: int
    logits: int             # output projection; 0 when tied to the embedding
    dense_layers: int       # layers with a dense MLP
    moe_layers: int         # layers with a routed MLP
    total: int
    active: int             # per token

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def norm_params(spec: TransformerSpec, width: int | None = None) -> int:
    w = spec.hidden if width is None else width
    return 2 * w if spec.norm == "layernorm" and spec.bias else w


def attention_parts(spec: TransformerSpec) -> tuple[int, int, int]:
    """One layer's attention parameters as (sharded by TP, duplicated on every TP rank, norms).

    Megatron shards the Q/K/V and output projections (and the QKV bias) over TP ranks; the
    output-projection bias and the norm are replicated. MLA's down-projections are
    "duplicated" linears in Megatron-Core (every TP rank holds and runs them in full).
    """
    h, a = spec.hidden, spec.heads
    norms = norm_params(spec)
    if spec.attention == "mla":
        qk, v = spec.qk_head_dim, spec.v_dim
        kv_lora, rope = int(spec.kv_lora_rank), int(spec.qk_rope_head_dim)  # type: ignore[arg-type]
        sharded = kv_lora * a * (int(spec.qk_nope_head_dim) + v) + a * v * h  # type: ignore[arg-type]
        dup = h * (kv_lora + rope)
        norms += kv_lora
        if spec.q_lora_rank:
            q_lora = int(spec.q_lora_rank)
            sharded += q_lora * a * qk
            dup += h * q_lora
            norms += q_lora
        else:
            sharded += h * a * qk
        return sharded, dup, norms
    d, g = spec.qk_head_dim, int(spec.kv_heads)  # type: ignore[arg-type]
    sharded = h * (a * d + 2 * g * d) + a * d * h
    dup = 0
    if spec.bias:
        sharded += a * d + 2 * g * d
        dup += h
    return sharded, dup, norms


def mlp_weights(spec: TransformerSpec, width: int) -> tuple[int, int]:
    """One MLP of inner width `width` as (TP-sharded weights and fc1 bias, replicated fc2 bias); no norm."""
    h = spec.hidden
    mats = 3 if spec.gated_mlp else 2
    sharded = mats * h * width + ((mats - 1) * width if spec.bias else 0)
    return sharded, (h if spec.bias else 0)


def params(spec: TransformerSpec) -> Params:
    h, V = spec.hidden, spec.vocab
    embedding = V * h + (spec.seq_len * h if spec.position_embedding == "learned" else 0)
    attention = sum(attention_parts(spec))
    mlp_dense = sum(mlp_weights(spec, int(spec.ffn_hidden))) + norm_params(spec)  # type: ignore[arg-type]
    moe_layers = spec.moe_layers
    dense_layers = spec.layers - moe_layers
    if spec.is_moe:
        expert = sum(mlp_weights(spec, int(spec.moe_ffn_hidden)))  # type: ignore[arg-type]
        router = h * spec.experts
        mlp_moe = (spec.experts + spec.shared_experts) * expert + router + norm_params(spec)
        mlp_moe_active = (spec.experts_per_token + spec.shared_experts) * expert + router + norm_params(spec)
    else:
        expert = router = mlp_moe = mlp_moe_active = 0
    final_norm = norm_params(spec)
    logits = 0 if spec.tied_embeddings else V * h
    common = embedding + spec.layers * attention + dense_layers * mlp_dense + final_norm + logits
    return Params(embedding=embedding, attention=attention, mlp_dense=mlp_dense, expert=expert, router=router,
                  mlp_moe=mlp_moe, mlp_moe_active=mlp_moe_active, final_norm=final_norm, logits=logits,
                  dense_layers=dense_layers, moe_layers=moe_layers,
                  total=common + moe_layers * mlp_moe, active=common + moe_layers * mlp_moe_active)


# --- layout rules shared by the FLOPs and memory modules --------------------------------------

def layout_problems(spec: TransformerSpec, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
                    seq_len: int | None = None) -> list[str]:
    """Why Megatron-LM would refuse this layout for this model (empty list: it is fine).

    Megatron divides heads, key/value groups and FFN widths evenly over TP ranks, the
    sequence over CP ranks, and routed experts over EP ranks; every stage needs a layer.
    """
    s = seq_len or spec.seq_len
    out = []
    for name, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)):
        if v < 1:
            out.append(f"{name} must be >= 1, got {v}")
    if out:
        return out
    if spec.heads % tp:
        out.append(f"heads ({spec.heads}) is not a multiple of tp ({tp})")
    if spec.attention == "mha" and int(spec.kv_heads) % tp:  # type: ignore[arg-type]
        out.append(f"kv_heads ({spec.kv_heads}) is not a multiple of tp ({tp})")
    if spec.layers - spec.moe_layers and int(spec.ffn_hidden) % tp:  # type: ignore[arg-type]
        out.append(f"ffn_hidden ({spec.ffn_hidden}) is not a multiple of tp ({tp})")
    if spec.is_moe and int(spec.moe_ffn_hidden) % tp:  # type: ignore[arg-type]
        out.append(f"moe_ffn_hidden ({spec.moe_ffn_hidden}) is not a multiple of tp ({tp})")
    if s % cp:
        out.append(f"seq_len ({s}) is not a multiple of cp ({cp})")
    if spec.experts % ep:
        out.append(f"experts ({spec.experts}) is not a multiple of ep ({ep})")
    if pp > spec.layers:
        out.append(f"pp ({pp}) exceeds layers ({spec.layers})")
    return out


def check_layout(spec: TransformerSpec, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
                 seq_len: int | None = None) -> None:
    problems = layout_problems(spec, tp, pp, cp, ep, seq_len)
    if problems:
        raise UserError("; ".join(problems), field="layout")


def stage_layer_counts(layers: int, pp: int, embedding_layer: bool = False, loss_layer: bool = False,
                       stages: tuple[int, ...] = ()) -> list[int]:
    """Transformer layers per pipeline stage, as even as possible. When pp does not divide the
    layers, the extra layers go to the middle stages first (the first stage also holds the
    embedding and the most in-flight activations, the last one the logits), then to the last,
    then the first. With Megatron-Core's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split the embedding and the loss count as one layer each
    (Llama 3.1 405B: 126 layers + 2 = 128 on pp 8 x interleave 8): the first stage then holds
    one transformer layer fewer, the last one too.

    `stages`: an explicit layout, the transformer layers of each virtual stage in schedule
    order (virtual stage i runs on rank i % pp; parse_pipeline_layout reads Megatron-Core's
    string); it replaces the even split."""
    if stages:
        counts = [0] * pp
        for i, n in enumerate(stages):
            counts[i % pp] += n
        return counts
    return list(_stage_layer_counts(layers, pp, embedding_layer, loss_layer))  # a copy: callers may change it


_REPEAT = re.compile(r"\(([^()]*)\)\*(\d+)")
_TOKEN_REPEAT = re.compile(r"([EtmL])\*(\d+)")


def parse_pipeline_layout(text: str) -> tuple[int, ...]:
    """Transformer layers per virtual stage of Megatron-Core's --pipeline-model-parallel-layout
    (e.g. "Et*3|(tt|)*29,m|L": stages split by `|`, `t` a transformer layer, `E` the embedding,
    `L` the loss, `m` a multi-token-prediction layer, `X*n` and `(...)*n` repeats; `,` is
    ignored). Only `t` counts: the embedding and loss sit on the first and last stage, and MTP
    layers are not among the model's `layers`. A list of numbers ("3|2|...|2") gives the layers
    of each stage directly. A malformed string raises ValueError."""
    parts = [p.strip() for p in text.split("|")]
    if all(p.isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    s = text.replace(",", "").replace(" ", "")
    while True:
        expanded = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), s)
        if expanded == s:
            break
        s = expanded
    s = _TOKEN_REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), s)
    if not s or set(s) - set("EtmL|"):
        raise ValueError(f"pipeline layout {text!r}: expected stages of E, t, m, L split by '|' "
                         "(Megatron-Core --pipeline-model-parallel-layout)")
    return tuple(stage.count("t") for stage in s.split("|"))


@lru_cache(maxsize=4096)
def _stage_layer_counts(layers: int, pp: int, embedding_layer: bool, loss_layer: bool) -> tuple[int, ...]:
    if pp > 1 and (embedding_layer or loss_layer):
        counts = stage_layer_counts(layers + int(embedding_layer) + int(loss_layer), pp)
        counts[0] -= int(embedding_layer)
        counts[-1] -= int(loss_layer)
        return tuple(counts)
    counts = [layers // pp] * pp
    order = list(range(1, pp - 1)) + [pp - 1, 0] if pp > 1 else [0]
    for i in range(layers % pp):
        counts[order[i % len(order)]] += 1
    return tuple(counts)
