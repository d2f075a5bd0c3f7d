"""CPU inference for small models: the roofline of the sockets."""

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.serving.cpu import CPU_GEMM_EFFICIENCY, CpuStepModel
from gpucluster.model.serving.queueing import Lengths, Traffic, max_rate
from gpucluster.model.transformer_params import params
from gpucluster.specs.workload import TransformerSpec

BERT_BASE = TransformerSpec(layers=12, hidden=768, heads=12, vocab=30522, seq_len=512, tied_embeddings=True)


def test_forward_is_compute_bound_at_peak_fraction():
    cpu = catalog.cpus.get("EPYC-9654")
    m = CpuStepModel(BERT_BASE, cpu, sockets=2)
    t = m.prefill(64, 128)
    flops = 2 * (params(BERT_BASE).total - BERT_BASE.vocab * BERT_BASE.hidden) * 64 * 128
    rate = cpu.peak_fp32_tflops.value * 1e12 * 2 * CPU_GEMM_EFFICIENCY
    assert t == pytest.approx(flops / rate, rel=0.3)
    assert m.prefill(64, 128) < 64 * m.prefill(1, 128)      # batching amortises the weight reads


def test_cpu_node_serves_a_small_classifier():
    m = CpuStepModel(BERT_BASE, catalog.cpus.get("EPYC-9654"), sockets=2)
    r, p, _ = max_rate(m, Traffic(1, Lengths(128), Lengths(1)), 256, 0.02, None)
    assert p is not None and 100 < r < 5000 and p.ttft_p99 <= 0.02
