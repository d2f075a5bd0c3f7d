"""Transformer model: published parameter counts, Megatron/Korthikanti FLOPs, GEMMs, ZeRO and activations."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.errors import UserError
from gpucluster.model.transformer import (activation_bytes_outside_layers, activation_bytes_per_layer,
                                          hardware_flops_per_iteration, layer_gemms, layout_problems, logit_gemm,
                                          model_flops_per_iteration, model_flops_per_token, padded_vocab, params,
                                          pipeline_inflight_microbatches, stage_layer_counts,
                                          weight_grad_optimizer_bytes)
from gpucluster.specs.workload import TransformerSpec, filled, load_model_spec

GPT_SIZES = ["megatron-gpt-22b", "megatron-gpt-175b", "megatron-gpt-530b", "megatron-gpt-1t"]


# --- parameters -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, total, active, tol", [
    ("llama2-7b", 6.74e9, None, 0.01),
    ("llama3-8b", 8.03e9, None, 0.01),
    ("llama3-70b", 70.6e9, None, 0.01),
    ("llama3.1-405b", 405.8e9, None, 0.01),
    ("gpt3-175b", 174.6e9, None, 0.01),
    ("mixtral-8x7b", 46.7e9, 12.9e9, 0.02),
    ("deepseek-v3", 671e9, 37e9, 0.03),          # without the MTP module
    ("nemotron-4-340b", 341e9, None, 0.02),
])
def test_published_parameter_counts(name, total, active, tol):
    p = params(load_model_spec(name))
    assert p.total == pytest.approx(total, rel=tol)
    assert p.active == pytest.approx(active if active else total, rel=tol)


def test_parameter_breakdown_adds_up():
    for name in ("gpt3", "deepseek-v3", "mixtral", "mpt-7b"):
        s = load_model_spec(name)
        p = params(s)
        total = (p.embedding + s.layers * p.attention + p.dense_layers * p.mlp_dense + p.moe_layers * p.mlp_moe
                 + p.final_norm + p.logits)
        assert total == p.total and p.dense_layers + p.moe_layers == s.layers
    ds = params(load_model_spec("deepseek-v3"))
    assert (ds.dense_layers, ds.moe_layers, ds.expert) == (3, 58, 3 * 7168 * 2048)
    assert params(load_model_spec("gpt3")).logits == 0          # tied
    assert params(load_model_spec("llama3-8b")).logits == 128256 * 4096


# --- FLOPs ----------------------------------------------------------------------------------------

def korthikanti_model_flops(B, s, l, h, V):
    """Narayanan et al. 2021 / Korthikanti et al. 2022: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))."""
    return 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))


@pytest.mark.parametrize("name", GPT_SIZES)
def test_gpt_flops_equal_the_72_formula(name):
    s = load_model_spec(name)
    for B, seq in ((1, 2048), (64, 2048), (1536, 4096)):
        expect = korthikanti_model_flops(B, seq, s.layers, s.hidden, s.vocab)
        assert model_flops_per_iteration(s, B, seq) == pytest.approx(expect, rel=1e-12)
        full = 96 * B * seq * s.layers * s.hidden**2 * (1 + seq / (6 * s.hidden) + s.vocab / (16 * s.layers * s.hidden))
        assert hardware_flops_per_iteration(s, B, "full", seq) == pytest.approx(full, rel=1e-12)
        assert hardware_flops_per_iteration(s, B, "none", seq) == model_flops_per_iteration(s, B, seq)
        # selective: one more forward of Q.K^T and scores x V, 4*B*s^2*h per layer
        sel = hardware_flops_per_iteration(s, B, "selective", seq) - model_flops_per_iteration(s, B, seq)
        assert sel == pytest.approx(4 * B * seq**2 * s.hidden * s.layers, rel=1e-12)


@given(layers=st.integers(1, 200), heads=st.sampled_from([1, 2, 8, 32, 96]), d=st.integers(1, 256),
       vocab=st.integers(1, 300_000), seq=st.integers(1, 32768), batch=st.integers(1, 4096))
@settings(max_examples=100, deadline=None)
def test_72_formula_identity_for_any_gpt_shape(layers, heads, d, vocab, seq, batch):
    h = heads * d
    s = TransformerSpec(layers=layers, hidden=h, heads=heads, vocab=vocab, seq_len=seq)
    assert model_flops_per_iteration(s, batch) == pytest.approx(korthikanti_model_flops(batch, seq, layers, h, vocab),
                                                                rel=1e-12)


def test_megatron_formula_with_gqa_and_swiglu():
    # Megatron-LM num_floating_point_operations, written out for Llama-3 70B
    s = load_model_spec("llama3-70b")
    B, seq, L, h, a, g, d, f, V = 16, 8192, 80, 8192, 64, 8, 128, 28672, 128256
    expect = 12 * B * seq * L * h * h * ((1 + g / a + seq / h) * (a * d / h) + f / h * 1.5 + V / (2 * L * h))
    assert model_flops_per_iteration(s, B) == pytest.approx(expect, rel=1e-12)
    causal = 12 * B * seq * L * h * h * ((1 + g / a + seq / h / 2) * (a * d / h) + f / h * 1.5 + V / (2 * L * h))
    assert model_flops_per_iteration(s, B, causal=True) == pytest.approx(causal, rel=1e-12)


def test_megatron_formula_for_moe():
    s = load_model_spec("mixtral")
    B, seq, L, h, a, g, d, f, V, k = 8, 4096, 32, 4096, 32, 8, 128, 14336, 32000, 2
    expect = 12 * B * seq * L * h * h * ((1 + g / a + seq / h) * (a * d / h) + f / h * k * 1.5 + V / (2 * L * h))
    assert model_flops_per_iteration(s, B, seq) == pytest.approx(expect, rel=1e-12)
    router = 6 * B * seq * L * h * 8
    assert model_flops_per_iteration(s, B, seq, include_router=True) - model_flops_per_iteration(s, B, seq) \
        == pytest.approx(router, rel=1e-12)


def test_six_n_d_cross_check():
    # training FLOPs per token = 6 x (matrix parameters other than the input embedding) + attention core
    for name in ("llama3-70b", "llama2-7b", "nemotron-4-340b", "mixtral"):
        s = load_model_spec(name)
        p = params(s)
        norms = (2 * s.layers + 1) * s.hidden
        matrices = p.active - p.embedding - norms - s.moe_layers * p.router
        core = 12 * s.seq_len * s.heads * filled(s.head_dim) * s.layers
        assert model_flops_per_token(s) == pytest.approx(6 * matrices + core, rel=1e-9)


def test_nemo_reported_tflops_match_our_flops_per_token(shared_dir):
    """NeMo reports model TFLOP/s and tokens/s per GPU: their ratio is the FLOPs per token it counts."""
    cases = yaml.safe_load((shared_dir / "validation" / "training-public.yaml").read_text())["cases"]
    checked = 0
    for case in cases:
        m = case["measured"]
        if "tflops_per_gpu" in m and "tokens_per_s_per_gpu" in m:
            spec = TransformerSpec.model_validate(case["model"])
            assert model_flops_per_token(spec) == pytest.approx(m["tflops_per_gpu"] * 1e12 / m["tokens_per_s_per_gpu"],
                                                                rel=0.01), case["id"]
            checked += 1
    assert checked >= 3


# --- GEMMs ----------------------------------------------------------------------------------------

def layout_flops(spec, global_batch, micro_batch, tp, cp=1, ep=1, sp=False):
    """Sum of 3 x the GEMMs of every layer and the logits, on every GPU, over all micro batches."""
    per_mb = 0.0
    layer_kinds = [True] * spec.dense_layers + [False] * spec.moe_layers if spec.is_moe else [None] * spec.layers
    for dense in layer_kinds:
        per_mb += sum(g.flops for g in layer_gemms(spec, micro_batch, tp, cp, sp, ep, dense_layer=dense))
    per_mb += logit_gemm(spec, micro_batch, tp, cp).flops
    return 3 * per_mb * tp * cp * global_batch / micro_batch


@pytest.mark.parametrize("name, tp, cp, b", [
    ("megatron-gpt-175b", 8, 1, 1), ("megatron-gpt-22b", 8, 2, 4), ("gpt3", 4, 1, 2),
    ("llama2-7b", 1, 1, 1), ("llama3-70b", 8, 2, 1), ("llama3.1-405b", 8, 4, 1), ("nemotron-4-340b", 8, 1, 1),
])
def test_gemms_reconcile_with_model_flops(name, tp, cp, b):
    s = load_model_spec(name)
    assert layout_flops(s, 64, b, tp, cp) == pytest.approx(model_flops_per_iteration(s, 64), rel=1e-3)


@pytest.mark.parametrize("name, tp, ep", [("mixtral", 4, 8), ("deepseek-v3", 8, 8), ("deepseek-v3", 1, 64)])
def test_moe_gemms_reconcile_with_sequence_parallelism(name, tp, ep):
    s = load_model_spec(name)
    assert layout_flops(s, 64, 1, tp, 1, ep, sp=True) == pytest.approx(
        model_flops_per_iteration(s, 64, include_router=True), rel=1e-9)


def test_gemm_shapes_on_one_gpu():
    s = load_model_spec("llama3-70b")
    g = {x.name: x for x in layer_gemms(s, 2, tp=8, cp=2)}
    assert (g["qkv"].m, g["qkv"].n, g["qkv"].k) == (2 * 4096, (64 + 16) * 128 // 8, 8192)
    assert g["attn_scores"].kind == "attention" and g["attn_scores"].count == 64 // 8 * 2
    assert (g["attn_scores"].m, g["attn_scores"].n, g["attn_scores"].k) == (4096, 8192, 128)
    assert (g["mlp_fc1"].n, g["mlp_fc2"].k) == (2 * 28672 // 8, 28672 // 8)
    assert layer_gemms(s, 2, tp=8, causal=True)[1].n == 4096
    m = {x.name: x for x in layer_gemms(load_model_spec("deepseek-v3"), 1, tp=1, ep=32)}
    assert m["expert_fc1"].count == 8 and m["expert_fc1"].m == 4096 * 8 * 32 / 256
    assert logit_gemm(s, 1, 8).n == 128256 / 8 and padded_vocab(50257, 8) == 51200


def test_bad_layouts_are_refused():
    s = load_model_spec("llama3-70b")
    assert layout_problems(s, tp=8, cp=2) == []
    with pytest.raises(UserError, match=r"kv_heads \(8\) is not a multiple of tp \(16\)"):
        layer_gemms(s, 1, tp=16)
    assert any("experts" in p for p in layout_problems(load_model_spec("mixtral"), ep=3))
    assert any("seq_len" in p for p in layout_problems(s, cp=3))


# --- memory ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama3-8b", "gpt3", "mpt-7b"])
@pytest.mark.parametrize("n", [1, 8, 64])
def test_zero_bytes_per_parameter(name, n):
    s = load_model_spec(name)
    P = params(s).total
    mem = [weight_grad_optimizer_bytes(s, dp=n, zero_stage=z, precision="bf16")["total"] for z in range(4)]
    assert mem[0] == pytest.approx(16 * P)
    assert mem[1] == pytest.approx((4 + 12 / n) * P)
    assert mem[2] == pytest.approx((2 + 14 / n) * P)
    assert mem[3] == pytest.approx(16 / n * P)
    assert weight_grad_optimizer_bytes(s, dp=n, precision="fp8") == weight_grad_optimizer_bytes(s, dp=n)
    assert weight_grad_optimizer_bytes(s, dp=n, fp32_grads=True)["grads"] == pytest.approx(4 * P)


def test_parameters_split_over_pipeline_tensor_and_expert_parallelism():
    s = load_model_spec("gpt3")                                     # tied: pp > 1 adds the logits copy
    stages = [weight_grad_optimizer_bytes(s, pp=8, stage=i)["params"] for i in range(8)]
    assert sum(stages) == pytest.approx(params(s).total + s.vocab * s.hidden)
    assert stage_layer_counts(61, 8) == [7, 8, 8, 8, 8, 8, 7, 7] and sum(stage_layer_counts(126, 16)) == 126
    ll = load_model_spec("llama3-70b")
    assert weight_grad_optimizer_bytes(ll, tp=8)["params"] == pytest.approx(params(ll).total / 8, rel=1e-3)
    ds = load_model_spec("deepseek-v3")
    p = params(ds)
    one = weight_grad_optimizer_bytes(ds, ep=64, dp=64)["params"]
    expect = p.total - p.moe_layers * (ds.experts - ds.experts // 64) * p.expert
    assert one == pytest.approx(expect)
    # ZeRO-1 with EP: expert optimizer state sharded over dp/ep, the rest over dp
    z1 = weight_grad_optimizer_bytes(ds, ep=8, dp=64, zero_stage=1)
    experts = p.moe_layers * ds.experts // 8 * p.expert
    assert z1["optimizer"] == pytest.approx(12 * (z1["params"] - experts) / 64 + 12 * experts / 8)


@pytest.mark.parametrize("name", GPT_SIZES)
def test_korthikanti_table2_activation_memory(name):
    """Per-layer activation bytes, Korthikanti et al. 2022 Table 2, with t = 8, b = 1, s = 2048."""
    spec = load_model_spec(name)
    s, b, h, a, t = 2048, 1, spec.hidden, spec.heads, 8

    def act(tp, sp, rc):
        return activation_bytes_per_layer(spec, b, tp, sp, rc, flash_attention=False)
    assert act(1, False, "none") == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    assert act(t, False, "none") == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    assert act(t, True, "none") == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    assert act(t, False, "selective") == pytest.approx(s * b * h * (10 + 24 / t))
    assert act(t, True, "selective") == pytest.approx(s * b * h * 34 / t)
    assert act(t, False, "full") == pytest.approx(2 * s * b * h)
    assert act(t, True, "full") == pytest.approx(2 * s * b * h / t)
    # flash attention keeps the fp32 log-sum-exp (4 bytes per head and token) instead of the scores
    flash = activation_bytes_per_layer(spec, b, t, True, "none")
    assert flash == pytest.approx(act(t, True, "selective") + 4 * a * s * b / t)
    extra = activation_bytes_outside_layers(spec, b, t, True)
    assert extra["last"] == pytest.approx(4 * s * b * h / t * (1 + spec.vocab / h))


def test_dropout_is_a_model_field_and_a_dropout_free_model_keeps_no_masks():
    gpt = load_model_spec("gpt3-175b")
    llama = load_model_spec("llama3-70b")
    assert gpt.dropout is True and llama.dropout is False      # the documented default: not gated_mlp
    stated = llama.model_copy(update={"dropout": True})
    assert TransformerSpec.model_validate(llama.model_dump() | {"dropout": True}).dropout is True
    s, b, t, h, a = llama.seq_len, 1, 8, llama.hidden, llama.heads
    # The two h-byte masks after attention and the MLP (split by t with sequence parallelism).
    assert (activation_bytes_per_layer(stated, b, t, True, "selective")
            - activation_bytes_per_layer(llama, b, t, True, "selective")) == pytest.approx(2 * s * b * h / t)
    # Unfused attention keeps the softmax output only (2 bytes per score), not its mask and dropout output.
    assert (activation_bytes_per_layer(stated, b, t, True, "none", flash_attention=False)
            - activation_bytes_per_layer(llama, b, t, True, "none", flash_attention=False)) == pytest.approx(
        2 * s * b * h / t + 3 * a * s * s * b / t)
    assert activation_bytes_outside_layers(llama, b, t, True)["first"] == 0
    assert activation_bytes_outside_layers(stated, b, t, True)["first"] == pytest.approx(s * b * h / t)


def test_activation_extension_for_gqa_swiglu_and_moe():
    s = load_model_spec("llama3-70b")
    seq, h, a, g, d, f, t = 8192, 8192, 64, 8, 128, 28672, 8
    inside = 2 * a * d + 4 * g * d + 2 * a * d + 4 * f + 2 * f       # Q, K+V, out-proj input, SwiGLU in, fc2 in
    assert activation_bytes_per_layer(s, 1, t, False, "selective", dropout=False) == pytest.approx(
        seq * (8 * h + inside / t))
    assert activation_bytes_per_layer(s, 1, t, True, "selective", cp=2, dropout=False) == pytest.approx(
        seq / 2 * (8 * h + inside) / t)
    m = load_model_spec("mixtral")
    dense = activation_bytes_per_layer(m, 1, 1, False, "selective", seq_len=4096, dense_layer=True)
    moe = activation_bytes_per_layer(m, 1, 1, False, "selective", seq_len=4096)
    k, h = 2, 4096
    # MoE adds the k token copies and expert outputs, the fp32 router logits and probabilities,
    # and k - 1 more expert MLPs than the dense layer (same widths here)
    assert moe - dense == pytest.approx(4096 * (4 * h * k + 8 * 8 + (k - 1) * 6 * 14336))


def test_pipeline_inflight_microbatches():
    assert [pipeline_inflight_microbatches(8, 1, i) for i in (0, 3, 7)] == [8, 5, 1]
    for p, v in ((8, 3), (4, 20), (35, 3), (2, 2)):
        assert pipeline_inflight_microbatches(p, v, 0) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    assert pipeline_inflight_microbatches(8, 1, 0, num_microbatches=4) == 4
    assert pipeline_inflight_microbatches(8, 3, 7) < pipeline_inflight_microbatches(8, 3, 0)


# --- properties -----------------------------------------------------------------------------------

shapes = st.fixed_dictionaries({
    "layers": st.integers(1, 96), "heads": st.sampled_from([1, 4, 8, 32]), "d": st.integers(8, 160),
    "vocab": st.integers(1000, 200_000), "seq_len": st.integers(128, 16384), "gated_mlp": st.booleans(),
    "experts": st.sampled_from([1, 8]), "tied_embeddings": st.booleans()})


def build(x, layers=None, d=None):
    heads, d = x["heads"], d or x["d"]
    moe = {"experts": x["experts"], "experts_per_token": 2} if x["experts"] > 1 else {}
    return TransformerSpec(layers=layers or x["layers"], hidden=heads * d, heads=heads, vocab=x["vocab"],
                           seq_len=x["seq_len"], gated_mlp=x["gated_mlp"], tied_embeddings=x["tied_embeddings"],
                           **moe)


@given(shapes)
@settings(max_examples=100, deadline=None)
def test_flops_and_params_grow_with_layers_and_hidden(x):
    base = build(x)
    for bigger in (build(x, layers=x["layers"] + 1), build(x, d=x["d"] + 1)):
        assert params(bigger).total > params(base).total
        assert params(bigger).active > params(base).active
        assert model_flops_per_iteration(bigger, 4) > model_flops_per_iteration(base, 4)
        for rc in ("none", "selective", "full"):
            assert hardware_flops_per_iteration(bigger, 4, rc) > hardware_flops_per_iteration(base, 4, rc)
