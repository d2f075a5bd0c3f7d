"""benchmarks/cross_validate.py fits each chip's sustained fraction per fold by replacing
compute.sustained: every compute-bound kernel must read it there, or the catalog's in-sample
value leaks into leave-one-source-out."""

import pytest

from gpucluster.model.training import compute
from gpucluster.model.training.kernels import layer_kernels
from gpucluster.specs.workload import TransformerSpec

SPEC = TransformerSpec(layers=24, hidden=2048, heads=16, vocab=50257, seq_len=8192)


def _core_s(monkeypatch, fraction: float) -> float:
    monkeypatch.setattr(compute, "sustained", lambda gpu, precision: (fraction, "test"))
    compute.gemm_curve.cache_clear()
    try:
        return layer_kernels(SPEC, "A100-SXM4-80GB", "bf16", 1, 1, 1, False, 1, 8192, None, True).core_forward_s
    finally:
        compute.gemm_curve.cache_clear()


def test_the_fused_attention_kernel_follows_a_replaced_sustained_fraction(monkeypatch):
    full, half = _core_s(monkeypatch, 1.0), _core_s(monkeypatch, 0.5)
    assert half == pytest.approx(2 * full, rel=1e-9)
