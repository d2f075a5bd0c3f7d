"""The serving engine as an input: registry defaults, refusal of unknown engines, and what each
default changes in a step (kernel tables, CUDA graphs, host cost, expert precision)."""

import pytest

from gpucluster.catalog.serving import default_engine, engine_names, get_engine, kernel_fit
from gpucluster.errors import UserError
from gpucluster.model.serving.kernels import host_step_s
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.step_time import Replica, decode_step_time, prefill_time
from gpucluster.specs.workload import load_model_spec


def test_registry_holds_the_engines_the_issue_names():
    for name in ("vllm", "sglang", "trtllm", "tgi", "lmdeploy", "gpt-fast"):
        assert name in engine_names()
    assert default_engine() in engine_names()
    e = get_engine("vllm")
    assert e.cuda_graphs and e.custom_allreduce and e.chunked_prefill and e.source


def test_unknown_engine_is_one_line_listing_the_valid_ones():
    with pytest.raises(UserError) as exc:
        get_engine("fastllm", field="--engine")
    msg = str(exc.value)
    assert "\n" not in msg and "fastllm" in msg and "vllm" in msg and "trtllm" in msg


def test_unnamed_engine_takes_the_default_with_the_fitted_host_cost(h100, llama8b):
    rep = Replica(llama8b, h100, 1, 1, Quant())
    assert rep.kernels.engine.name == default_engine()
    named = Replica(llama8b, h100, 1, 1, Quant(), default_engine())
    assert host_step_s(named.kernels) == get_engine(default_engine()).host_step_s
    from gpucluster.model.serving import fitted
    assert host_step_s(rep.kernels) == fitted.STEP_HOST_S


def test_engine_kernel_tables_apply_where_measured(h100, llama70b):
    for eng in ("vllm", "trtllm"):
        rep = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"), eng)
        fit = kernel_fit("H100-SXM5-80GB", get_engine(eng).kernel_data, "gemm_fp8")
        assert fit is not None and rep.kernels.gemm.t0_s == fit.t0_s
        assert "aiconfigurator" in fit.source
    # a chip without measured tables falls back to its microbenchmarks
    from gpucluster.plan.fabric_from import from_flags
    mi = from_flags("MI300X:8", 1, "NDR400", None).fabric
    rep = Replica(llama70b, mi, 8, 1, Quant("fp8", "fp8"), "vllm")
    assert "microbenchmarks" in rep.kernels.provenance


def test_no_cuda_graphs_pays_kernel_launches_only_beyond_the_device_time(a100, llama8b, monkeypatch):
    """LMDeploy (no CUDA graphs) and TensorRT-LLM share kernel tables here. Launches are
    asynchronous: a decode step whose kernels outlast their launches (8B on one A100: ~30 us a
    kernel against 5 us a launch) hides them; where launching is slower than the kernels run
    (here a 50 us launch), the step is bound by the launches: at least layers x kernels x launch."""
    from dataclasses import replace

    from gpucluster.model.serving import step_time

    def pair(launch_s=None):
        lm = Replica(llama8b, a100, 1, 1, Quant(), "lmdeploy")
        trt = Replica(llama8b, a100, 1, 1, Quant(), "trtllm")
        d_trt = decode_step_time(trt, 1, 512)
        if launch_s is not None:
            slow, orig = replace(lm.kernels, launch_s=launch_s), step_time.kernels_of
            monkeypatch.setattr(step_time, "kernels_of", lambda rep: slow if rep is lm else orig(rep))
            step_time._stage.cache_clear()
        d_lm = decode_step_time(lm, 1, 512)
        assert d_lm.terms["gemm"] == pytest.approx(d_trt.terms["gemm"])
        exposed = (d_lm.terms["overhead"] - host_step_s(lm.kernels)) - (d_trt.terms["overhead"] - host_step_s(trt.kernels))
        return lm, d_lm, d_trt, exposed

    lm, _, _, hidden = pair()
    assert lm.kernels.launch_s > 0 and Replica(llama8b, a100, 1, 1, Quant(), "trtllm").kernels.launch_s == 0
    assert hidden == pytest.approx(0.0, abs=1e-12)
    lm_s, d_s, d_trt, exposed = pair(50e-6)
    step_time._stage.cache_clear()
    assert exposed > 0
    device = d_trt.total - host_step_s(Replica(llama8b, a100, 1, 1, Quant(), "trtllm").kernels)
    assert d_s.total - host_step_s(lm_s.kernels) == pytest.approx(max(device, exposed + device))
    assert d_s.total - host_step_s(lm_s.kernels) >= llama8b.layers * 10 * 50e-6
    p_lm = prefill_time(lm, 1, 512)
    p_trt = prefill_time(Replica(llama8b, a100, 1, 1, Quant(), "trtllm"), 1, 512)
    assert p_lm.terms["gemm"] == pytest.approx(p_trt.terms["gemm"])


def test_expert_precision_is_honoured(h100):
    """An FP8 checkpoint: TensorRT-LLM runs FP8 grouped GEMMs, LMDeploy's MoE kernels run 16 bits
    (engines.yaml): twice the expert weight bytes per decode step."""
    mixtral = load_model_spec("mixtral")
    trt = Replica(mixtral, h100, 2, 1, Quant("fp8", "fp8"), "trtllm")
    lm = Replica(mixtral, h100, 2, 1, Quant("fp8", "fp8"), "lmdeploy")
    assert trt.kernels.expert_weight_bytes == 1.0 and lm.kernels.expert_weight_bytes == 2.0
    assert lm.kernels.expert.precision in ("bf16", "fp16")
    assert decode_step_time(lm, 1, 512).bytes_s > 1.5 * decode_step_time(trt, 1, 512).bytes_s
    # a dense model has no experts: the engines' dense GEMMs are the same tables
    assert get_engine("lmdeploy").expert_precision == "bf16"


def test_measured_moe_op_stands_for_the_expert_gemms(h100):
    """Where the engine's fused MoE op is measured (Mixtral shapes), the expert GEMMs take its fit:
    a MoE layer pays the op's fixed cost (routing, permute, combine: tens of us), not a dense
    GEMM's few us, so a batch-1 decode step of Mixtral is slower than with dense-GEMM experts."""
    mixtral = load_model_spec("mixtral")
    rep = Replica(mixtral, h100, 2, 1, Quant(), "trtllm")
    fit = kernel_fit("H100-SXM5-80GB", "trtllm", "moe_bf16")
    assert fit is not None and "moe/trtllm" in fit.source
    assert rep.kernels.expert.t0_s == fit.t0_s / 2 and rep.kernels.expert.t0_s > 2 * rep.kernels.gemm.t0_s
    # where the engine's tables hold no MoE op for the chip, the experts keep the dense curve
    from gpucluster.plan.fabric_from import from_flags
    a100 = from_flags("A100-SXM4-80GB:8", 1, "NDR400", None).fabric
    dense = Replica(mixtral, a100, 2, 1, Quant(), "trtllm")
    if kernel_fit("A100-SXM4-80GB", "trtllm", "moe_bf16") is None:
        assert dense.kernels.expert is dense.kernels.gemm


def test_engine_version_selects_the_registry_overrides(h100, llama8b):
    """vLLM before 0.8 (the V0 engine) pays ~1 ms of host time per step; the current entry less."""
    old, new = get_engine("vllm@0.6.6"), get_engine("vllm")
    assert old.host_step_s > new.host_step_s and old.version == "0.6.6" and new.version is None
    assert get_engine("vllm@0.9.1").host_step_s == new.host_step_s
    t_old = decode_step_time(Replica(llama8b, h100, 1, 1, Quant(), "vllm@0.6.6"), 1, 512).total
    t_new = decode_step_time(Replica(llama8b, h100, 1, 1, Quant(), "vllm"), 1, 512).total
    assert t_old - t_new == pytest.approx(old.host_step_s - new.host_step_s)
    with pytest.raises(UserError):
        get_engine("vllm@latest")
