"""Every bad argument to the public API is a UserError naming the option and its range (issue 23
item 1): never a bare TypeError, ValueError, KeyError, AttributeError or pydantic ValidationError
from deep inside, and never a wrong accept (nodes=True, seed=1.5, checkpoint_interval=0)."""

from __future__ import annotations

import inspect
import math

import pytest

import gpucluster
from gpucluster.api_args import checked, Int

SCENARIO = "examples/scenarios/shared-vs-partitioned.yaml"
CLUSTER = "examples/h200-256-ndr400.yaml"

# (call, the option the message must name): the 14 sites the campaign hit, and their neighbours.
BAD = [
    (lambda: gpucluster.document_model("nope"), "unknown document"),
    (lambda: gpucluster.document_model(5), "name"),
    (lambda: gpucluster.simulate(SCENARIO, seed=-1), "--seed"),
    (lambda: gpucluster.simulate(SCENARIO, seed=1.5), "--seed"),
    (lambda: gpucluster.simulate(SCENARIO, events=5), "--events"),
    (lambda: gpucluster.simulate(5), "scenario"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", nodes=1.5), "--nodes"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", nodes=True), "--nodes"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", nodes=10**15), "--nodes"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", top=1.5), "--top"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", global_batch=2**31), "--global-batch"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", layout=5), "--layout"),
    (lambda: gpucluster.plan_train(None), "model"),
    (lambda: gpucluster.plan_train("llama3-70b", gpu="H100:8", no_such_option=1), "unexpected keyword"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu="H100:8", max_batch=1.5), "--max-batch"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu="H100:8", input_tokens=math.nan), "--input"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu="H100:8", nodes=1.5), "--nodes"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu="H100:8", compare=5), "--compare"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu=8), "--gpu"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=1e12, gpu="H100:8"), "--rate"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate="1e12", gpu="H100:8"), "--rate"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=math.inf, gpu="H100:8"), "--rate"),
    (lambda: gpucluster.plan_serve("llama3-70b", rate=10, gpu="H100:8", slo_ttft=math.nan), "--slo-ttft"),
    (lambda: gpucluster.validate(None), "path"),
    (lambda: gpucluster.load_cluster(5), "path"),
    (lambda: gpucluster.load_model(3.5), "name_or_path"),
    (lambda: gpucluster.check(CLUSTER, profile=None), "--profile"),
    (lambda: gpucluster.check(CLUSTER, input_gbps_per_gpu="x"), "--input-gbps-per-gpu"),
    (lambda: gpucluster.check(CLUSTER, input_gbps_per_gpu=math.nan), "--input-gbps-per-gpu"),
    (lambda: gpucluster.check(CLUSTER, input_gbps_per_gpu=math.inf), "--input-gbps-per-gpu"),
    (lambda: gpucluster.check(CLUSTER, input_gbps_per_gpu=-1), "--input-gbps-per-gpu"),
    (lambda: gpucluster.check(CLUSTER, checkpoint_interval=0), "--checkpoint-interval"),
    (lambda: gpucluster.check(CLUSTER, checkpoint_interval="0m"), "--checkpoint-interval"),
    (lambda: gpucluster.check(CLUSTER, jobs="examples/jobs/seed-train-70b.sbatch"), "--jobs"),
]


@pytest.mark.parametrize("call,names", BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_bad_argument_is_a_user_error_naming_it(call, names):
    with pytest.raises(gpucluster.UserError) as info:
        call()
    assert names in info.value.message
    assert "\n" not in info.value.message and len(info.value.message) < 600


def test_every_parameter_of_every_public_function_has_a_rule():
    """A parameter added later without a rule would let any type through to the model."""
    from importlib import import_module

    from gpucluster import _API
    for name, (module, attr) in _API.items():
        func = getattr(import_module(module), attr)
        if not inspect.isfunction(func):
            continue   # the result classes and UserError
        rules = getattr(func, "__gpucluster_rules__", None)
        assert rules is not None, name
        params = set(inspect.signature(func).parameters)
        assert params == set(rules), (name, params ^ set(rules))


def test_good_arguments_still_work_and_keep_their_signature():
    assert "nodes" in inspect.signature(gpucluster.plan_train).parameters
    assert gpucluster.load_cluster(CLUSTER).name
    assert gpucluster.document_model("cost").__name__.endswith("Document")
    import numpy as np
    plan = gpucluster.plan_train("llama3-8b", gpu="H100:8", nodes=np.int64(2), tokens="100B", top=1)
    assert plan.best is not None


def test_a_hostile_repr_is_quoted_short():
    class Loud:
        def __repr__(self) -> str:
            return "x" * 100_000

    @checked({"n": Int(1, 5)})
    def f(n):
        return n

    with pytest.raises(gpucluster.UserError) as info:
        f(Loud())
    assert len(info.value.message) < 200
