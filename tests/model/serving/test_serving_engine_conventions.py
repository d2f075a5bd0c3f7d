"""Engine conventions that change what a measured figure means (engines.yaml): where the first
output token comes from, and the version overrides of an engine's defaults (CUDA graphs, custom
all-reduce, first token). Each is an input of the registry, selected by a case's
`serving.engine`/`engine_version` or `plan serve --engine name@version`, never by its notes."""

import pytest

from gpucluster.catalog import serving as cs
from gpucluster.catalog.serving import get_engine
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.step_time import Replica, decode_step_time, prefill_time
from gpucluster.model.serving.static_batch import predict_batch


def test_current_engines_emit_the_first_token_from_the_prefill():
    for name in cs.engine_names():
        assert get_engine(name).first_token == "prefill", name


def test_turbomind_before_0_2_emits_the_first_token_from_a_decode_step(a100, llama8b):
    """LMDeploy v0.1's first-token latency is the prefill and one decode step; its static batch
    runs output_tokens decode steps. Measured (LMDeploy docs, a100_fp16.md, Llama 2 7B, 128-token
    prompt, batch 1): FTL 22 ms against ~9.8 ms per output token: a prefill alone is ~12-15 ms."""
    old, new = get_engine("lmdeploy@0.1.0"), get_engine("lmdeploy")
    assert old.first_token_step and not new.first_token_step
    r_old = Replica(llama8b, a100, 1, 1, Quant(), "lmdeploy@0.1.0")
    r_new = Replica(llama8b, a100, 1, 1, Quant(), "lmdeploy")
    p_old, p_new = predict_batch(r_old, 1, 128, 128), predict_batch(r_new, 1, 128, 128)
    pre = prefill_time(r_old, 1, 128).total
    assert p_new["ttft_s"] == pytest.approx(prefill_time(r_new, 1, 128).total)
    assert p_old["ttft_s"] == pytest.approx(pre + decode_step_time(r_old, 1, 128).total)
    # one more decode step in the batch: 128 steps after the prefill instead of 127
    assert p_old["latency_s"] == pytest.approx(pre + 128 * p_old["tpot_s"])
    assert p_old["latency_s"] > p_new["latency_s"] + 0.5 * p_new["tpot_s"]


def test_version_overrides_set_the_engines_defaults():
    """TensorRT-LLM 0.5 all-reduced with NCCL, LMDeploy v0.1 too; later versions keep the entry's."""
    assert not get_engine("trtllm@0.5.0").custom_allreduce and get_engine("trtllm@0.16.0").custom_allreduce
    assert get_engine("trtllm").custom_allreduce
    lm = get_engine("lmdeploy@0.1.0")
    assert not lm.custom_allreduce and lm.first_token_step and "0.2" in lm.source
    # overrides that do not cover the version leave the entry alone
    assert get_engine("vllm@0.6.6").first_token == "prefill"


def test_nccl_allreduce_of_an_old_version_slows_a_tp_decode_step(h100, llama70b):
    old = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"), "trtllm@0.5.0")
    new = Replica(llama70b, h100, 8, 1, Quant("fp8", "fp8"), "trtllm@0.16.0")
    d_old, d_new = decode_step_time(old, 1, 2048), decode_step_time(new, 1, 2048)
    assert d_old.terms["gemm"] == pytest.approx(d_new.terms["gemm"])
    assert d_old.terms["tp_comm"] > 1.5 * d_new.terms["tp_comm"]


def test_first_token_step_adds_an_iteration_to_steady_state_ttft(a100, llama8b):
    from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, analyze
    pts = []
    for eng in ("lmdeploy@0.1.0", "lmdeploy"):
        rep = Replica(llama8b, a100, 1, 1, Quant(), eng)
        pts.append(analyze(StepModel(rep), Traffic(2.0, Lengths(512.0), Lengths(128.0)), 256))
    old, new = pts
    assert old.ttft_p50 > new.ttft_p50 and old.ttft_p50 - new.ttft_p50 == pytest.approx(old.iteration_s, rel=0.3)


def test_a_bad_version_override_is_one_line(registry_error):
    msg = registry_error(versions=[{"before": "1.0", "warp_speed": True}])
    assert "\n" not in msg and "warp_speed" in msg and "versions[0]" in msg


def test_discrete_event_run_follows_the_first_token_convention(a100, llama8b):
    """The batcher run emits a decode_step engine's first token one iteration after its prefill,
    and the analytic TTFT p50 holds to the run (the same half-load check as the default)."""
    from gpucluster.model.serving.batcher_sim import simulate
    from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, analyze
    traffic = Traffic(5.0, Lengths(512.0), Lengths(128.0))
    runs = {}
    for eng in ("lmdeploy", "lmdeploy@0.1.0"):
        step = StepModel(Replica(llama8b, a100, 1, 1, Quant(), eng))
        runs[eng] = analyze(step, traffic, 256), simulate(step, traffic, 256, requests=1500)
    (_, s_new), (m_old, s_old) = runs["lmdeploy"], runs["lmdeploy@0.1.0"]
    assert s_old.ttft_p50 - s_new.ttft_p50 == pytest.approx(m_old.iteration_s, rel=0.3)
    assert s_old.ttft_p50 == pytest.approx(m_old.ttft_p50, rel=0.05)
    assert s_old.tpot_p50 == pytest.approx(s_new.tpot_p50, rel=0.02)
