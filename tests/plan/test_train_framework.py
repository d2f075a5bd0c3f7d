"""`plan train --framework / --shard-group / --layout pipeline_layout=...`: the stack as an input."""

from __future__ import annotations

import pytest

from gpucluster.errors import UserError
from gpucluster.plan.train_request import parse_layout, plan_train


def _plan(**kw):
    return plan_train("llama3-8b", gpu="H100:8", nodes=4, tokens="10B", top=3, **kw)


def test_the_framework_is_a_plan_input_and_shown():
    plan = _plan(framework="fsdp", layout="zero=3,tp=1,pp=1")
    assert plan.best.layout.framework == "fsdp"
    assert plan.meta()["framework"] == "fsdp"
    assert "(default" in _plan().meta()["framework"]


def test_a_framework_without_pipeline_parallelism_is_searched_without_it():
    plan = _plan(framework="fsdp")
    assert all(e.layout.pp == 1 and e.layout.cp == 1 for e in plan.search.ranked)   # nor context parallelism
    with pytest.raises(UserError, match="no context parallelism"):
        _plan(framework="fsdp", layout="cp=2")
    assert any(e.layout.cp > 1 for e in _plan(framework="torchtitan", layout="cp=2").search.ranked)


def test_an_unknown_framework_is_one_clear_error():
    with pytest.raises(UserError) as exc:
        _plan(framework="paxml")
    assert "--framework" in str(exc.value.field) and "torchtitan" in str(exc.value)


def test_a_stack_or_kernel_goes_by_its_other_names_too():
    from gpucluster.cli.plan_cmd import ATTENTION_HELP
    from gpucluster.model.training import attention, frameworks

    assert parse_layout("framework=FSDP2,attention=fa2") == {"framework": "fsdp", "attention": "flash2"}
    assert parse_layout("framework=Megatron-LM")["framework"] == "megatron"
    plan = _plan(framework="lit-gpt", attention="sdpa", layout="zero=3,tp=1,pp=1")
    assert plan.best.layout.framework == "fsdp" and plan.best.layout.attention_kernel == "flash2"
    with pytest.raises(UserError) as exc:
        _plan(layout="framework=paxml")
    assert "megatron" in str(exc.value)
    # Every alias names a registered entry, and the CLI's help names every kernel of the registry.
    assert all(v in frameworks.FRAMEWORKS for v in frameworks.ALIASES.values())
    assert all(v in attention.KERNELS for v in attention.ALIASES.values())
    assert all(k in ATTENTION_HELP for k in attention.KERNELS)


def test_shard_group_is_hsdp():
    plan = _plan(framework="fsdp", layout="zero=3,tp=1,pp=1,cp=1", shard_group=8)
    assert plan.best.layout.shard_group == 8
    with pytest.raises(UserError):
        _plan(shard_group=0)


def test_layout_takes_an_explicit_pipeline():
    fixed = parse_layout("pp=4,v=2,pipeline_layout=Ettt|(tttt|)*6tttttL")
    assert fixed["stage_layers"] == (3,) + (4,) * 6 + (5,)
    plan = _plan(layout="tp=1,pp=4,v=2,pipeline_layout=Ettt|(tttt|)*6tttttL")
    assert plan.best.layout.stage_layers == fixed["stage_layers"] and plan.best.layout.interleave == 2
    with pytest.raises(UserError):
        parse_layout("pipeline_layout=Et|q|L")
    numbers = parse_layout("pp=2,pipeline_layout=16|16")
    assert numbers["stage_layers"] == (16, 16)
