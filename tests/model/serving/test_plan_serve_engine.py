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
    # no CUDA graphs: each decode step pays its launches, so a replica's TPOT is longer
    lm_tpot, default_tpot = lm.best.point.tpot_p50, default.best.point.tpot_p50
    assert lm_tpot is not None and default_tpot is not None and lm_tpot > default_tpot


def test_unknown_engine_is_refused_naming_the_option():
    with pytest.raises(UserError) as exc:
        plan_serve("llama3-8b", 20, gpu="H100:8", engine="fastllm")
    assert exc.value.field == "--engine" and "valid:" in str(exc.value) and "\n" not in str(exc.value)
