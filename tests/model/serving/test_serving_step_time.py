"""Prefill and decode step times: the physics each term stands for, with no fitted factor."""

import pytest

from gpucluster.model.serving import fitted
from gpucluster.model.serving.kernels import host_step_s
from gpucluster.model.serving.kv_cache import Quant, weight_bytes_per_gpu
from gpucluster.model.serving.static_batch import predict_batch
from gpucluster.model.serving.step_time import Replica, decode_step_time, efficiency, prefill_time
from gpucluster.model.transformer_params import params
from gpucluster.specs.workload import load_model_spec


def test_decode_at_batch_one_reads_the_weights(rep8b):
    st = decode_step_time(rep8b, 1, 512)
    # the weights at the measured weight-read bandwidth of the engine's GEMMs on this chip
    floor = weight_bytes_per_gpu(rep8b.spec, rep8b.quant) / (rep8b.kernels.gemm.hbm_gbps * 1e9)
    assert st.bound == "HBM bandwidth"
    assert floor < st.total < 1.5 * floor + host_step_s(rep8b.kernels)


def test_lower_precision_weights_decode_faster(h100, llama8b):
    t = {w: decode_step_time(Replica(llama8b, h100, 1, 1, Quant(w)), 1, 512).total for w in ("bf16", "fp8", "int4")}
    assert t["int4"] < t["fp8"] < t["bf16"]


def test_fp8_gemms_at_decode_shapes_are_not_twice_as_fast(h100, llama70b):
    """Measured FP8 GEMMs at small m read the weights slower and start slower than BF16 ones: half
    the bytes does not halve the step."""
    bf16 = decode_step_time(Replica(llama70b, h100, 8, 1, Quant("bf16")), 1, 512).terms["gemm"]
    fp8 = decode_step_time(Replica(llama70b, h100, 8, 1, Quant("fp8")), 1, 512).terms["gemm"]
    assert 0.5 * bf16 < fp8 < bf16


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
    for ctx in (128, 1024, 8192):
        ts = [decode_step_time(rep8b, b, ctx).total for b in (1, 2, 4, 16, 64, 128)]
        assert ts == sorted(ts)
    for b in (1, 32):
        ts = [decode_step_time(rep8b, b, c).total for c in (64, 512, 4096, 32768)]
        assert ts == sorted(ts)


def test_tensor_parallel_adds_all_reduces(h100, llama70b):
    one = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"))
    st = decode_step_time(one, 16, 256)
    assert st.terms["tp_comm"] > 0
    tp4 = decode_step_time(Replica(llama70b, h100, 4, 1, Quant("fp8", "fp8")), 16, 256)
    assert st.terms["gemm"] < tp4.terms["gemm"]           # half the weights per GPU
    tp1 = decode_step_time(Replica(load_model_spec("llama3-8b"), h100, 1, 1, Quant()), 16, 256)
    assert tp1.terms["tp_comm"] == 0


def test_small_all_reduces_are_latency_bound(h100, llama70b):
    """At batch 1 a layer's two all-reduces carry 16 KiB each: their time is the measured latency,
    not bytes over bandwidth (which would be well under a microsecond)."""
    rep = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"))
    assert rep.kernels.allreduce is not None
    alpha = rep.kernels.allreduce[0]
    per = decode_step_time(rep, 1, 256).terms["tp_comm"] / (2 * llama70b.layers)
    assert alpha <= per < 2 * alpha
    assert rep.kernels.allreduce_s(16384) < 1.2 * rep.kernels.allreduce_s(1024)


def test_pipeline_stages_hop_and_keep_latency(h100, llama70b):
    pp1 = decode_step_time(Replica(llama70b, h100, 4, 1, Quant("fp8")), 32, 512)
    pp2 = decode_step_time(Replica(llama70b, h100, 4, 2, Quant("fp8")), 32, 512)
    assert pp2.terms["pp_comm"] > 0
    assert pp2.total == pytest.approx(pp1.total, rel=0.3)


def test_moe_decode_reads_only_the_experts_it_uses(h100):
    mixtral = load_model_spec("mixtral")
    rep = Replica(mixtral, h100, 2, 1, Quant())
    one = decode_step_time(rep, 1, 512)
    every = weight_bytes_per_gpu(mixtral, rep.quant, 2) / (rep.kernels.gemm.hbm_gbps * 1e9)
    assert one.bytes_s < 0.5 * every
    assert decode_step_time(rep, 64, 512).bytes_s > 1.5 * one.bytes_s


def test_no_factor_divides_the_step(h100, llama70b):
    """The step is its terms: device kernels plus the host's work, nothing scaled after."""
    rep = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"))
    assert efficiency(rep)[0] == 1.0
    d = decode_step_time(rep, 16, 200)
    assert d.total == pytest.approx(sum(d.terms.values()))
    assert d.terms["overhead"] >= host_step_s(rep.kernels)
    p = prefill_time(rep, 4, 512)
    assert p.terms["overhead"] >= host_step_s(rep.kernels) + fitted.PREFILL_FIXED_S


def test_static_batch_latency_is_prefill_plus_decode_steps(rep8b):
    lat = predict_batch(rep8b, 8, 128, 9)["latency_s"]
    p = prefill_time(rep8b, 8, 128).total
    d = decode_step_time(rep8b, 8, 128 + 1 + 7 / 2).total
    assert lat == pytest.approx(p + 8 * d)


def test_expert_parallel_waits_for_the_busiest_rank(h100):
    """EP inside the TP group: each GPU holds experts / ep whole experts; the step waits for the
    rank with the most routed tokens, so at equal weight bytes per GPU it is no faster than TP
    sharding and its imbalance shrinks as the batch grows."""
    from gpucluster.model.serving.step_time import ep_imbalance

    mixtral = load_model_spec("mixtral")
    tp = Replica(mixtral, h100, 8, 1, Quant("fp8", "fp8"))
    ep = Replica(mixtral, h100, 8, 1, Quant("fp8", "fp8"), None, 8)
    assert ep_imbalance(8, 16) > ep_imbalance(8, 1024) > 1.0 == ep_imbalance(1, 16)
    assert ep_imbalance(8, 2) <= 8
    for b in (1, 64):
        assert decode_step_time(ep, b, 512).terms["gemm"] >= 0.95 * decode_step_time(tp, b, 512).terms["gemm"]
    with pytest.raises(ValueError):
        Replica(load_model_spec("llama3-8b"), h100, 8, 1, Quant(), None, 2)   # dense: no experts
