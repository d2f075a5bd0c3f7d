"""A chip without engine-measured serving kernels (MI300X, MI325X): its decode GEMMs and decode
attention take the measured chips' fixed costs and read/STREAM bandwidth ratios, not its large-GEMM
microbenchmark fit's fixed cost and the STREAM bandwidth itself."""

from statistics import median

import pytest

from gpucluster.catalog import catalog
from gpucluster.catalog.serving import engine_names, get_engine, kernel_fit
from gpucluster.model.serving.kernels import KERNEL_S
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.step_time import Replica, decode_step_time
from gpucluster.model.training.compute import gemm_curve, hbm_gbps
from gpucluster.plan.fabric_from import from_flags


def _measured(key: str) -> tuple[list[float], list[float]]:
    """(fixed costs s, read GB/s over the chip's STREAM GB/s) of every measured `key` table."""
    sources = {get_engine(e).kernel_data for e in engine_names()} - {None}
    t0s, ratios = [], []
    for name, gpu in catalog.gpus.items():
        for src in sources:
            fit = kernel_fit(name, src, key)
            if fit is not None:
                t0s.append(fit.t0_s)
                ratios.append(fit.gbps / hbm_gbps(gpu))
    return t0s, ratios


@pytest.fixture(scope="module", params=["MI300X", "MI325X"])
def amd(request):
    return from_flags(f"{request.param}:8", 1, "NDR400", None).fabric


@pytest.mark.parametrize("weights, key", [("fp8", "gemm_fp8"), ("bf16", "gemm_bf16")])
def test_decode_gemm_borrows_the_measured_fixed_cost_and_bandwidth_ratio(amd, llama70b, weights, key):
    t0s, ratios = _measured(key)
    assert len(t0s) >= 3
    kn = Replica(llama70b, amd, 8, 1, Quant(weights, weights), "vllm").kernels
    stream = hbm_gbps(amd.gpu)
    assert kn.gemm.t0_s == pytest.approx(median(t0s))
    assert kn.gemm.hbm_gbps == pytest.approx(stream * median(ratios))
    # decode-shaped weight reads sit below STREAM on the measured chips, and so here
    assert min(ratios) <= kn.gemm.hbm_gbps / stream <= max(ratios) and kn.gemm.hbm_gbps < stream
    # the compute side stays the chip's own microbenchmark curve
    base = gemm_curve(amd.gpu.name, weights)
    assert (kn.gemm.peak_tflops, kn.gemm.eff_max) == (base.peak_tflops, base.eff_max)
    assert "assumption" in kn.gemm.provenance and "assumption" in kn.provenance


def test_decode_attention_borrows_the_measured_fixed_cost(amd, llama70b):
    t0s, ratios = _measured("decode_attention_fp8")
    t0, kv_bps, _ = Replica(llama70b, amd, 8, 1, Quant("fp8", "fp8"), "vllm").kernels.decode_attention
    assert t0 == pytest.approx(median(t0s)) and min(t0s) <= t0 <= max(t0s) and t0 > KERNEL_S
    assert kv_bps == pytest.approx(hbm_gbps(amd.gpu) * 1e9 * median(ratios))


def test_measured_chip_keeps_its_own_tables(h100, llama70b):
    kn = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"), "vllm").kernels
    fit = kernel_fit("H100-SXM5-80GB", "vllm", "gemm_fp8")
    assert fit is not None and (kn.gemm.t0_s, kn.gemm.hbm_gbps) == (fit.t0_s, fit.gbps)


def test_small_batch_decode_step_is_no_faster_than_its_weight_reads_at_the_borrowed_rate(amd, llama70b):
    rep = Replica(llama70b, amd, 8, 1, Quant("fp8", "fp8"), "vllm")
    st = decode_step_time(rep, 1, 1024)
    kn = rep.kernels
    weight_bytes = llama70b.layers * 12 * llama70b.hidden ** 2 / 8 * 0.9   # a lower bound on 70B's layers
    assert st.terms["gemm"] > weight_bytes / (kn.gemm.hbm_gbps * 1e9)
    # one fixed cost per decode GEMM: at least 4 GEMMs per layer
    assert st.terms["gemm"] > 4 * llama70b.layers * kn.gemm.t0_s
