"""Attention kernels by generation: each chip's rates come from its own measured rows, kernel order and
backward/forward ratios follow the microbenchmarks, borrowing is said, long sequences stay on the data."""

from __future__ import annotations

import statistics

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.training import attention, kernels
from gpucluster.specs.workload import TransformerSpec


def forward_rows(gpu: str, measured_as: str):
    return [p for p in catalog.gpus.get(gpu).efficiency.attention
            if p.kernel == measured_as and p.direction == "forward" and p.precision in ("bf16", "fp16")
            and p.seq_len and p.head_dim]


def measured_pairs():
    """Every (chip, kernel) with shaped forward rows of its own."""
    out = []
    for name in catalog.gpus.names():
        for k in attention.KERNELS.values():
            if k.measured_as and forward_rows(name, k.measured_as):
                out.append((name, k.name))
    return out


@pytest.mark.parametrize(("gpu", "kernel"), measured_pairs())
def test_a_chip_with_rows_uses_its_own_rows(gpu, kernel):
    rate = attention.kernel_rate(gpu, kernel)
    assert f"measured on {gpu}" in rate.provenance and "borrowed from" not in rate.provenance.split(";")[0]
    # The fitted curve passes near the chip's own points (median within 10%, none off by 25%).
    errs = [rate.forward_tflops(p.seq_len, p.head_dim, bool(p.causal)) / p.tflops - 1
            for p in forward_rows(gpu, attention.KERNELS[kernel].measured_as)]
    assert statistics.median(abs(e) for e in errs) < 0.10
    assert max(abs(e) for e in errs) < 0.25


def test_changing_a_chips_rows_changes_only_that_chip(monkeypatch):
    h100 = catalog.gpus.get("H100-SXM5-80GB")
    before_h100 = attention.kernel_rate("H100-SXM5-80GB", "flash3").level_tflops
    before_b200 = attention.kernel_rate("B200", "cudnn").level_tflops
    rows = [p.model_copy(update={"tflops": p.tflops * 1.5}) if p.kernel == "fa3" else p
            for p in h100.efficiency.attention]
    eff = h100.efficiency.model_copy(update={"attention": rows})
    monkeypatch.setattr(catalog.gpus, "_entries", {**catalog.gpus._entries,
                                                   "H100-SXM5-80GB": h100.model_copy(update={"efficiency": eff})})
    attention.clear()
    try:
        assert attention.kernel_rate("H100-SXM5-80GB", "flash3").level_tflops == pytest.approx(1.5 * before_h100)
        assert attention.kernel_rate("B200", "cudnn").level_tflops == pytest.approx(before_b200)
    finally:
        monkeypatch.undo()
        attention.clear()


def same_shape_pairs():
    """(chip, kernel a, kernel b, shape) where both kernels were measured forward at one shape."""
    out = []
    for name, _ in catalog.gpus.items():
        rows = [p for p in catalog.gpus.get(name).efficiency.attention
                if p.direction == "forward" and p.precision in ("bf16", "fp16") and p.seq_len and p.head_dim]
        by_shape: dict = {}
        for p in rows:
            by_shape.setdefault((p.seq_len, p.head_dim, bool(p.causal)), {})[p.kernel] = p.tflops
        for shape, kern in by_shape.items():
            names = sorted(kern)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    if max(kern[a], kern[b]) > 1.05 * min(kern[a], kern[b]):
                        fast, slow = (a, b) if kern[a] > kern[b] else (b, a)
                        out.append((name, fast, slow, shape))
    return out


def _registry_name(measured_as: str) -> str:
    return next(k.name for k in attention.KERNELS.values() if k.measured_as == measured_as)


def test_the_microbenchmarks_rank_kernels_and_the_model_keeps_that_order():
    pairs = same_shape_pairs()
    assert len(pairs) >= 10  # H100 fa2/fa3/cudnn and B200 fa2/cudnn at shared shapes
    for gpu, fast, slow, (s, d, causal) in pairs:
        r_fast = attention.kernel_rate(gpu, _registry_name(fast)).forward_tflops(s, d, causal)
        r_slow = attention.kernel_rate(gpu, _registry_name(slow)).forward_tflops(s, d, causal)
        assert r_fast > r_slow, (gpu, fast, slow, s, d, causal)


def test_backward_over_forward_comes_from_the_chips_own_backward_rows():
    gpu = catalog.gpus.get("B200")
    rows = [p for p in gpu.efficiency.attention if p.kernel == "cudnn" and p.precision == "bf16"]
    fwd = {(p.seq_len, p.head_dim, p.causal): p.tflops for p in rows if p.direction == "forward"}
    ratios = [p.tflops / fwd[(p.seq_len, p.head_dim, p.causal)] for p in rows
              if p.direction == "backward" and (p.seq_len, p.head_dim, p.causal) in fwd]
    rate = attention.kernel_rate("B200", "cudnn")
    assert "backward/forward" in rate.provenance and "measured" in rate.provenance
    assert rate.backward_ratio == pytest.approx(statistics.median(ratios), rel=0.08)
    assert rate.backward_ratio < 1.0  # the backward kernel runs slower per FLOP, as measured


def test_a_kernel_a_chip_never_ran_is_borrowed_and_says_from_where():
    rate = attention.kernel_rate("H800", "flash2")
    assert "not measured on H800" in rate.provenance and "borrowed from" in rate.provenance
    assert "assumption" in rate.provenance
    # Same architecture first: H800 borrows a Hopper chip's FlashAttention-2, not Blackwell's.
    donor = rate.provenance.split("borrowed from ")[1].split(" ")[0]
    assert catalog.gpus.get(donor).architecture == "Hopper"


def test_default_is_per_generation_and_frameworks_can_override():
    h100, b200, a100 = (catalog.gpus.get(n) for n in ("H100", "B200", "A100"))
    assert attention.resolve("default", a100) == "flash2"
    assert attention.resolve("default", b200) == "cudnn"
    assert attention.resolve("flash", h100) == attention.resolve("default", h100)
    assert attention.resolve("default", h100, framework_default="cudnn") == "cudnn"
    assert attention.resolve("fa3", h100) == "flash3"
    with pytest.raises(ValueError, match="unknown attention kernel"):
        attention.resolve("flash9", h100)
    assert attention.kernel_problem("FA3") is None and attention.kernel_problem("default") is None
    problem = attention.kernel_problem("flash9")
    assert problem is not None and "flash2" in problem


def test_long_sequences_stay_on_the_measured_rates():
    # B200 cuDNN was measured from 8K to 128K (causal): the model holds within 15% across that range.
    rate = attention.kernel_rate("B200", "cudnn")
    for p in forward_rows("B200", "cudnn"):
        assert rate.forward_tflops(p.seq_len, p.head_dim, bool(p.causal)) == pytest.approx(p.tflops, rel=0.15)
    # Longer sequences amortise per-row costs: the rate never falls as s grows in the model.
    assert rate.forward_tflops(131072, 128, True) >= rate.forward_tflops(8192, 128, True)


def test_context_parallel_runs_one_unmasked_kernel_per_block():
    spec = TransformerSpec(layers=4, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, gated_mlp=True,
                           vocab=128256, seq_len=131072)
    full = kernels.layer_kernels(spec, "H100-SXM5-80GB", "bf16", 1, 8, 16, True, 1, 131072, None, True)
    assert full.core_kernels == 16
    # Same attention FLOPs on 16 GPUs: each GPU does 1/16 of them.
    one = kernels.layer_kernels(spec, "H100-SXM5-80GB", "bf16", 1, 8, 1, True, 1, 131072, None, True)
    assert full.core_forward_s < one.core_forward_s / 10


def test_sliding_window_cuts_attention_time_and_keys():
    assert attention.keys_per_query(8192, True, None) == 4096
    assert attention.keys_per_query(8192, True, 1024) == pytest.approx(1024 - 1024 * 1023 / 2 / 8192, rel=1e-3)
    base = dict(layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True, vocab=32000,
                seq_len=32768)
    full = kernels.layer_kernels(TransformerSpec(**base), "H100", "bf16", 1, 1, 1, False, 1, 32768, None, True)
    win = kernels.layer_kernels(TransformerSpec(**base, sliding_window=4096), "H100", "bf16", 1, 1, 1, False, 1,
                                32768, None, True)
    assert win.core_forward_s < full.core_forward_s / 3


def test_faster_kernel_gives_a_faster_layer():
    spec = TransformerSpec(layers=4, hidden=4096, heads=32, vocab=32000, seq_len=8192)

    def core(kernel: str) -> float:
        return kernels.layer_kernels(spec, "H100", "bf16", 1, 1, 1, False, 1, 8192, None, True,
                                     kernel=kernel).core_forward_s

    assert core("flash3") < core("flash2")
    unfused = kernels.layer_kernels(spec, "H100", "bf16", 1, 1, 1, False, 1, 8192, None, False).core_forward_s
    assert core("flash2") < unfused
