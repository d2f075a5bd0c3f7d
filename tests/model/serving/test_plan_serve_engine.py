"""`plan serve --engine`: the engine reaches the search, the request and the plan's provenance;
an unknown one is refused in one line naming the option."""

import pytest

from gpucluster.errors import UserError
from gpucluster.plan.serve_request import plan_serve


def test_engine_reaches_the_plan():
    default = plan_serve("llama3-8b", 20, gpu="H100:8", output_tokens=64)
    lm = plan_serve("llama3-8b", 20, gpu="H100:8", output_tokens=64, engine="lmdeploy")
    assert default.request["engine"] is None and lm.request["engine"] == "lmdeploy"
    assert "LMDeploy" in lm.best.efficiency[1] and "not named" in default.best.efficiency[1]
    assert lm.document().request.engine == "lmdeploy"
    # no CUDA graphs: launches can only add to a decode step (they hide behind longer kernels),
    # so LMDeploy's TPOT is never below TensorRT-LLM's, whose kernel tables it shares
    trt = plan_serve("llama3-8b", 20, gpu="H100:8", output_tokens=64, engine="trtllm")
    lm_tpot, trt_tpot = lm.best.point.tpot_p50, trt.best.point.tpot_p50
    assert lm_tpot is not None and trt_tpot is not None and lm_tpot >= trt_tpot * (1 - 1e-9)


def test_engine_version_reaches_the_plan():
    """`--engine lmdeploy@0.1.0`: the version is kept (request, search), so its overrides apply:
    TurboMind v0.1's first token comes from a decode step, one more iteration to the first token."""
    new = plan_serve("llama3-8b", 20, gpu="H100:8", output_tokens=64, engine="lmdeploy")
    old = plan_serve("llama3-8b", 20, gpu="H100:8", output_tokens=64, engine="LMDeploy@0.1.0")
    assert old.request["engine"] == "lmdeploy@0.1.0"
    assert old.best.point.ttft_p50 > new.best.point.ttft_p50


def test_unknown_engine_is_refused_naming_the_option():
    with pytest.raises(UserError) as exc:
        plan_serve("llama3-8b", 20, gpu="H100:8", engine="fastllm")
    assert exc.value.field == "--engine" and "valid:" in str(exc.value) and "\n" not in str(exc.value)
