"""Prefill and decode step times: the physics each term stands for."""

import pytest

from gpucluster.model.serving.calibration import serving_efficiency
from gpucluster.model.serving.kv_cache import Quant, weight_bytes_per_gpu
from gpucluster.model.serving.step_time import (STEP_OVERHEAD_S, Replica, batch_latency_s, decode_step_time,
                                                prefill_time)
from gpucluster.model.training.compute import hbm_gbps
from gpucluster.model.transformer_params import params
from gpucluster.specs.workload import load_model_spec


def test_decode_at_batch_one_reads_the_weights(rep8b):
    st = decode_step_time(rep8b, 1, 512)
    floor = weight_bytes_per_gpu(rep8b.spec, rep8b.quant) / (hbm_gbps(rep8b.gpu) * 1e9)
    assert st.bound == "HBM bandwidth"
    eff, _ = serving_efficiency(rep8b.gpu.name, "bf16")
    assert floor / eff < st.total < 1.5 * floor / eff + STEP_OVERHEAD_S


def test_lower_precision_weights_decode_faster(h100, llama8b):
    t = {w: decode_step_time(Replica(llama8b, h100, 1, 1, Quant(w)), 1, 512).total for w in ("bf16", "fp8", "int4")}
    assert t["int4"] < t["fp8"] < t["bf16"]


def test_prefill_is_compute_bound(rep8b):
    st = prefill_time(rep8b, 16, 1024)
    assert st.bound == "compute"
    flops = 2 * params(rep8b.spec).active * 16 * 1024
    peak = rep8b.gpu.peak_tflops["bf16"].value * 1e12
    assert flops / peak < st.total < 4 * flops / peak


def test_decode_grows_with_batch_and_context(rep8b):
    small, big = decode_step_time(rep8b, 8, 512).total, decode_step_time(rep8b, 256, 512).total
    assert big > small
    assert decode_step_time(rep8b, 64, 8192).total > decode_step_time(rep8b, 64, 512).total
    # tokens per second rise with batch while decode stays memory-bound
    assert 256 / big > 8 / small


def test_tensor_parallel_adds_all_reduces(h100, llama70b):
    one = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"))
    st = decode_step_time(one, 16, 256)
    assert st.terms["tp_comm"] > 0
    tp4 = decode_step_time(Replica(llama70b, h100, 4, 1, Quant("fp8", "fp8")), 16, 256)
    assert st.terms["gemm"] < tp4.terms["gemm"]           # half the weights per GPU
    tp1 = decode_step_time(Replica(load_model_spec("llama3-8b"), h100, 1, 1, Quant()), 16, 256)
    assert tp1.terms["tp_comm"] == 0


def test_pipeline_stages_hop_and_keep_latency(h100, llama70b):
    pp1 = decode_step_time(Replica(llama70b, h100, 4, 1, Quant("fp8")), 32, 512)
    pp2 = decode_step_time(Replica(llama70b, h100, 4, 2, Quant("fp8")), 32, 512)
    assert pp2.terms["pp_comm"] > 0
    assert pp2.total == pytest.approx(pp1.total, rel=0.3)


def test_moe_decode_reads_only_the_experts_it_uses(h100):
    mixtral = load_model_spec("mixtral")
    rep = Replica(mixtral, h100, 2, 1, Quant())
    one = decode_step_time(rep, 1, 512)
    every = weight_bytes_per_gpu(mixtral, rep.quant, 2) / (hbm_gbps(rep.gpu) * 1e9)
    assert one.bytes_s < 0.5 * every / serving_efficiency(rep.gpu.name, "bf16")[0]
    assert decode_step_time(rep, 64, 512).bytes_s > 1.5 * one.bytes_s


def test_uncalibrated_is_the_kernel_model(h100, llama70b):
    cal = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"))
    raw = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"), calibrated=False)
    eff, _ = serving_efficiency("H100-SXM5-80GB", "fp8")
    a, b = decode_step_time(cal, 16, 200).total, decode_step_time(raw, 16, 200).total
    assert a - STEP_OVERHEAD_S == pytest.approx((b - STEP_OVERHEAD_S) / eff)


def test_static_batch_latency_is_prefill_plus_decode_steps(rep8b):
    lat = batch_latency_s(rep8b, 8, 128, 9)
    p = prefill_time(rep8b, 8, 128).total
    d = decode_step_time(rep8b, 8, 128 + 1 + 7 / 2).total
    assert lat == pytest.approx(p + 8 * d)


def test_calibration_never_copies_another_chips_fit():
    from gpucluster.model.serving.calibration import DEFAULT_SERVING_FRACTION

    v, src = serving_efficiency("MI300X", "fp8")
    assert v == DEFAULT_SERVING_FRACTION and "assumption" in src
    v, src = serving_efficiency("H100-SXM5-80GB", "bf16")   # H100's FP8 fit is not its BF16 one
    assert v == DEFAULT_SERVING_FRACTION and "assumption" in src
    v, src = serving_efficiency("H100-SXM5-80GB", "fp8")
    assert "fitted" in src
