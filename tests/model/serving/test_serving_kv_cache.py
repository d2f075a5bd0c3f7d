"""KV cache and weights per GPU against published figures and invariants."""

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.serving.kv_cache import (Quant, kv_bytes_per_token, kv_bytes_per_token_per_gpu, replica_memory,
                                               weight_bytes_per_gpu)
from gpucluster.model.transformer_params import params
from gpucluster.specs.workload import load_model_spec


def test_kv_bytes_per_token_published():
    # Kwon et al. 2023 (vLLM), section 3: "the KV cache of a single token demands 800 KB" for OPT-13B
    # (40 layers, hidden 5120, fp16); Llama-2-13B has the same shape.
    assert kv_bytes_per_token(load_model_spec("llama2-13b")) == 2 * 40 * 5120 * 2 == 819_200
    # Llama 3 70B, GQA with 8 KV heads of 128: 320 KiB per token in bf16, half in fp8.
    assert kv_bytes_per_token(load_model_spec("llama3-70b")) == 327_680
    assert kv_bytes_per_token(load_model_spec("llama3-70b"), "fp8") == 163_840
    # DeepSeek-V3 MLA: the latent (512) and the rotary key (64) per layer, 61 layers.
    assert kv_bytes_per_token(load_model_spec("deepseek-v3")) == 61 * 576 * 2


def test_kv_splits_over_tp_and_replicates_past_kv_heads():
    spec = load_model_spec("llama3-70b")
    full = kv_bytes_per_token(spec)
    assert kv_bytes_per_token_per_gpu(spec, tp=8) == full / 8
    assert kv_bytes_per_token_per_gpu(spec, tp=16) == full / 8       # one whole KV head per rank
    assert kv_bytes_per_token_per_gpu(spec, tp=1, pp=2) == full / 2
    mla = load_model_spec("deepseek-v3")
    assert kv_bytes_per_token_per_gpu(mla, tp=8) == pytest.approx(kv_bytes_per_token(mla))


def test_weights_per_gpu_by_precision():
    spec = load_model_spec("llama3-70b")
    total = params(spec).total
    bf16 = weight_bytes_per_gpu(spec, Quant("bf16"), tp=8)
    assert bf16 == pytest.approx(total * 2 / 8, rel=0.01)
    fp8 = weight_bytes_per_gpu(spec, Quant("fp8"), tp=8)
    int4 = weight_bytes_per_gpu(spec, Quant("int4"), tp=8)
    assert int4 < fp8 < bf16
    # embedding and lm_head stay 16-bit: fp8 is a little over half of bf16
    assert 0.5 < fp8 / bf16 < 0.56
    assert 0.5 < int4 / fp8 < 0.6


def test_compute_precision_follows_the_chip():
    h100, a100 = catalog.gpus.get("H100"), catalog.gpus.get("A100-SXM4-80GB")
    assert Quant("fp8").compute(h100) == "fp8"
    assert Quant("fp8").compute(a100) == "bf16"      # weight-only fp8 on Ampere
    assert Quant("int4").compute(h100) == "bf16"     # W4A16
    assert Quant("fp4").compute(catalog.gpus.get("B200")) == "fp4"
    with pytest.raises(ValueError):
        Quant("int3")


def test_sequences_that_fit():
    h100 = catalog.gpus.get("H100")
    spec = load_model_spec("llama3-70b")
    assert not replica_memory(spec, h100, Quant("bf16"), 1, 1, 1024).fits
    m = replica_memory(spec, h100, Quant("bf16"), 8, 1, 1024)
    assert m.fits
    expected = (h100.hbm_bytes * 0.9 - m.weights - m.workspace) // (m.kv_per_token * 1024)
    assert m.max_sequences == expected
    longer = replica_memory(spec, h100, Quant("bf16"), 8, 1, 4096)
    assert longer.max_sequences < m.max_sequences
    fp8kv = replica_memory(spec, h100, Quant("bf16", "fp8"), 8, 1, 1024)
    assert fp8kv.max_sequences >= 2 * m.max_sequences - 1
