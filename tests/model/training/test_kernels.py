"""The kernel-level compute model: batched attention GEMMs, wave quantization, the host floor."""

from __future__ import annotations

import pytest

from gpucluster.model.training import kernels
from gpucluster.model.training.compute import gemm_curve, wave_factor
from gpucluster.specs.workload import TransformerSpec

A100 = "A100-SXM4-80GB"


def small(hidden: int) -> TransformerSpec:
    return TransformerSpec(layers=12, hidden=hidden, heads=16, vocab=51200, seq_len=1024)


def layer(spec: TransformerSpec, mb: int, tp: int = 1, flash: bool = False) -> kernels.LayerKernels:
    return kernels.layer_kernels(spec, A100, "fp16", mb, tp, 1, False, 1, 1024, None, flash)


def test_wave_factor_is_one_on_full_waves_and_above_one_on_a_partial_wave():
    assert wave_factor(128 * 108, 128, 1, 108) == 1.0          # exactly one full wave
    assert wave_factor(128 * 109, 128, 1, 108) == pytest.approx(216 / 109)  # one tile spills into a second wave
    assert wave_factor(1000, 1000, 1, None) == 1.0             # unknown SM count: no quantization


def test_batched_attention_gemm_is_one_kernel_not_one_per_head():
    curve = gemm_curve(A100, "fp16")
    one = curve.batched_time_s(1024, 1024, 128, 128)
    separate = curve.time_s(1024, 1024, 128, 128)
    assert one < separate / 3   # 128 launches each paying the kernel's fixed cost


def test_small_layers_are_host_bound_and_large_ones_gpu_bound():
    # At micro batch 1 a 1024-wide layer keeps the GPU busy less than the host needs to issue it.
    tiny = layer(small(1024), 1)
    assert tiny.forward_s < tiny.kernels * kernels.HOST_S_PER_KERNEL
    assert tiny.forward() > 1.5 * tiny.forward_s
    big = kernels.layer_kernels(TransformerSpec(layers=96, hidden=12288, heads=96, vocab=51200, seq_len=2048),
                                A100, "fp16", 4, 1, 1, False, 1, 2048, None, False)
    assert big.forward() == pytest.approx(big.forward_s, rel=0.01)


def test_time_per_sequence_falls_with_micro_batch_as_vtrain_measured():
    # vTrain (public file): 2048-wide, 12 layers, one A100 per replica: 52 ms per sequence at
    # micro batch 1 and 35 ms at micro batch 8; the model must show the same direction and scale.
    spec = small(2048)
    per_seq = {mb: (layer(spec, mb).forward() + layer(spec, mb).backward()) / mb for mb in (1, 8)}
    assert 1.2 < per_seq[1] / per_seq[8] < 2.5


def test_unfused_attention_costs_more_than_flash():
    spec = TransformerSpec(layers=32, hidden=4096, heads=32, vocab=32000, seq_len=4096)
    unfused = kernels.layer_kernels(spec, A100, "bf16", 1, 1, 1, False, 1, 4096, None, False)
    flash = kernels.layer_kernels(spec, A100, "bf16", 1, 1, 1, False, 1, 4096, None, True)
    assert unfused.forward_s > flash.forward_s
    assert unfused.core_kernels == 5 and flash.core_kernels == 1


def test_residual_chain_charges_only_the_ops_the_model_has():
    gpt = small(1024)                                                    # biases and dropout
    llama = TransformerSpec(layers=12, hidden=1024, heads=16, vocab=32000, seq_len=1024, gated_mlp=True)
    assert gpt.bias and gpt.dropout and not llama.bias and not llama.dropout
    assert kernels.residual_bytes_kernels(gpt, fused=True) == (7.0, 1)   # sum + 1-byte mask, one kernel
    assert kernels.residual_bytes_kernels(llama, fused=True) == (6.0, 1)
    assert kernels.residual_bytes_kernels(gpt, fused=False) == (15.0, 3)  # bias add, dropout, add
    assert kernels.residual_bytes_kernels(llama, fused=False) == (6.0, 1)  # the add alone
    # A dropout-free model's unfused attention runs no dropout kernel on the probabilities.
    unfused_gpt = layer(gpt, 2)
    unfused_llama = kernels.layer_kernels(llama, A100, "fp16", 2, 1, 1, False, 1, 1024, None, False)
    assert unfused_llama.core_kernels == unfused_gpt.core_kernels - 1
    assert unfused_llama.core_forward_s < unfused_gpt.core_forward_s


def test_the_host_issues_the_output_layer_loss_and_embedding_kernels_too(monkeypatch):
    from gpucluster.model.training.fabric import TrainingFabric
    from gpucluster.model.training.layout import Layout
    from gpucluster.model.training.step import estimate

    spec = small(1024)                    # GPT-style: learned positions, dropout
    assert kernels.input_kernels(spec) == 1 + 2 + 1 + 2 * 2
    fab = TrainingFabric(A100, 8, 8, "InfiniBand", 25.0)
    lay = Layout(micro_batch=1, global_batch=4, precision="fp16", flash_attention=False)
    # With a host far slower than the GPU, one micro batch costs its kernels x the host's time per kernel.
    monkeypatch.setattr(kernels, "HOST_S_PER_KERNEL", 1.0)
    monkeypatch.setattr(kernels, "HOST_BLEND_POWER", 64.0)
    from gpucluster.model.training import step
    step._layer_cached.cache_clear()
    try:
        per_mb = estimate(spec, lay, fab).terms["compute"] / 4
        k = layer(spec, 1)
        layers = spec.layers * (k.kernels + 2 * k.kernels)            # forward + backward
        outside = kernels.OUTPUT_KERNELS + kernels.input_kernels(spec)
        assert per_mb == pytest.approx(layers + outside, rel=0.02)
    finally:
        step._layer_cached.cache_clear()


def test_fp8_casts_only_the_gemm_inputs_that_no_norm_kernel_writes_in_fp8():
    from gpucluster.model.training.compute import hbm_gbps
    from gpucluster.catalog import catalog

    h100 = "H100-SXM5-80GB"
    spec = TransformerSpec(layers=32, hidden=4096, heads=32, ffn_hidden=11008, gated_mlp=True, vocab=32000,
                           seq_len=4096)
    args = (2, 1, 1, False, 1, 4096, None, True)
    fp8 = kernels.layer_kernels(spec, h100, "fp8", *args)
    bf16 = kernels.layer_kernels(spec, h100, "bf16", *args)
    tokens, bw = 2 * 4096, hbm_gbps(catalog.gpus.get(h100)) * 1e9
    # The attention output projection's input (h) and fc2's input (ffn) are cast; QKV's and fc1's
    # come out of the norm already in FP8 (TELayerNormColumnParallelLinear).
    casts = 4 * tokens * (spec.hidden + 11008) / bw
    assert fp8.memory_s - bf16.memory_s == pytest.approx(casts, rel=1e-9)
    assert {"qkv", "mlp_fc1"} <= kernels.NORM_FUSED_FP8 and "attn_out" not in kernels.NORM_FUSED_FP8
