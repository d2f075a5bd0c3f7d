"""The model's shape as Megatron-LM arguments (pretrain_gpt.py), from the plan's model.

The shape comes from the plan itself (`model_spec`, written by `plan train --json`), else from
the preset the plan names. Argument names are Megatron-LM's (megatron/training/arguments.py);
tests/generate/test_megatron_validate.py runs Megatron-LM's own parse_args() + validate_args()
on them.

What Megatron-LM takes from elsewhere, and so is not written here:
- the vocabulary: Megatron-LM sizes the embedding from the tokenizer (padded to a multiple of
  128 x tp), so the tokenizer placeholder names the vocabulary the plan assumed;
- the RoPE base (`--rotary-base`, default 10000) and other hyperparameters: the model spec does
  not hold them (the job script says so for RoPE models: rope_note).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.errors import UserError

if TYPE_CHECKING:
    from gpucluster.generate.plan_file import JobPlan
    from gpucluster.specs.workload import TransformerSpec

POSITION = {"rope": "rope", "learned": "learned_absolute", "none": "none"}
NORM = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
# Megatron-LM's MLP activations: gelu is its default; the others by flag.
ACTIVATION = {"gelu": [], "swiglu": ["--swiglu"], "squared_relu": ["--squared-relu"]}


def model_spec(plan: JobPlan) -> TransformerSpec | None:
    """The plan's model shape: the plan's own `model_spec`, else the named preset, else None."""
    from gpucluster.specs.workload import TransformerSpec, model_presets

    if plan.model_spec is not None:
        return TransformerSpec.model_validate(plan.model_spec)
    try:
        presets = model_presets()
        return presets.get(plan.model).model if plan.model in presets else None
    except (UserError, KeyError, LookupError):
        return None


def shape_args(plan: JobPlan, spec: TransformerSpec) -> tuple[list[str], list[str]]:
    """(arguments, warnings) for the model's shape; a shape Megatron-LM cannot build is refused."""
    where = plan.source or None

    def refuse(field: str, reason: str) -> UserError:
        return UserError(reason, file=where, field=f"model_spec.{field}")

    args = [f"--num-layers={spec.layers}", f"--hidden-size={spec.hidden}",
            f"--num-attention-heads={spec.heads}", f"--ffn-hidden-size={spec.ffn_hidden}",
            f"--max-position-embeddings={max(plan.seq_len, spec.seq_len)}"]
    warnings: list[str] = []
    if spec.attention == "mla":
        args.append("--multi-latent-attention")
        if spec.q_lora_rank is not None:
            args.append(f"--q-lora-rank={spec.q_lora_rank}")
        args += [f"--kv-lora-rank={spec.kv_lora_rank}", f"--qk-head-dim={spec.qk_nope_head_dim}",
                 f"--qk-pos-emb-head-dim={spec.qk_rope_head_dim}", f"--v-head-dim={spec.v_head_dim}"]
    else:
        if spec.kv_heads != spec.heads:
            args += ["--group-query-attention", f"--num-query-groups={spec.kv_heads}"]
        if spec.head_dim != spec.hidden // spec.heads:
            args.append(f"--kv-channels={spec.head_dim}")
    if spec.position_embedding not in POSITION:
        raise refuse("position_embedding", f"{spec.position_embedding}: Megatron-LM's GPT model has no "
                                           "ALiBi (rope, learned or none)")
    args.append(f"--position-embedding-type={POSITION[str(spec.position_embedding)]}")
    args.append(f"--normalization={NORM[str(spec.norm)]}")
    if spec.activation not in ACTIVATION:
        raise refuse("activation", f"{spec.activation}: Megatron-LM's GPT model offers gelu, swiglu and "
                                   "squared_relu")
    args += ACTIVATION[str(spec.activation)]
    if not spec.bias:
        args.append("--disable-bias-linear")
    if not spec.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if spec.is_moe:
        args += [f"--num-experts={spec.experts}", f"--moe-router-topk={spec.experts_per_token}",
                 f"--moe-ffn-hidden-size={spec.moe_ffn_hidden}"]
        if spec.shared_experts:
            args.append(f"--moe-shared-expert-intermediate-size={spec.shared_experts * int(spec.moe_ffn_hidden or 0)}")
        if spec.dense_layers:
            args.append(f"--moe-layer-freq=([0]*{spec.dense_layers}+[1]*{spec.layers - spec.dense_layers})")
        if spec.moe_max_nodes is not None:
            warnings.append(f"{plan.source}: model_spec.moe_max_nodes: node-limited routing is Megatron-LM's "
                            "--moe-router-num-groups/--moe-router-group-topk, which depend on how experts are "
                            "placed on nodes; not written")
    return args, warnings



def rope_note(spec: TransformerSpec | None) -> str | None:
    """A comment for the job script (not a warning: it holds for every RoPE model)."""
    if spec is None or spec.position_embedding != "rope":
        return None
    return ("the RoPE base is not part of the model spec: Megatron-LM uses --rotary-base=10000 unless you add "
            "--arg=--rotary-base=N")
