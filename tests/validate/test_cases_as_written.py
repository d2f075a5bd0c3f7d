"""Cases taken as written: stated fields used as stated, documented defaults for the rest,
and nothing read from `source` or `notes`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucluster.specs.validation_case import Case
from gpucluster.validate import training_predictor
from gpucluster.validate.predictors import Unsupported
from gpucluster.validate.runner import load_file
from gpucluster.validate.training_predictor import defaults_taken, predict_training

CASE: dict[str, Any] = {
    "id": "t", "kind": "training", "source": "Someone et al. 2024, Table 1",
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 64, "gpus_per_node": 8,
                 "scale_out": {"type": "infiniband", "gbps_per_nic": 400, "nics_per_node": 8}},
    "model": {"layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_mlp": True, "vocab": 32000,
              "seq_len": 4096},
    "training": {"global_batch": 128, "micro_batch": 1, "tp": 2, "pp": 2, "dp": 16, "cp": 1,
                 "interleave": 1, "sequence_parallel": True, "recompute": "none", "zero": 1, "precision": "bf16"},
    "measured": {"tflops_per_gpu": 400.0},
}


def predict(case: dict[str, Any] | None = None, **training) -> dict[str, float]:
    c = copy.deepcopy(case or CASE)
    c["training"].update(training)
    return predict_training(Case.model_validate(c))


def test_a_dense_case_that_states_every_field_but_ep_is_not_searched(monkeypatch):
    def no_search(*a, **k):
        raise AssertionError("a fully stated dense layout went to the search")
    monkeypatch.setattr(training_predictor, "search", no_search)
    assert predict() == predict(ep=1)


def test_predictions_never_change_when_only_source_or_notes_change(shared_dir):
    files = ("training-public.yaml", "training-sharded-public.yaml", "training-vtrain-single-public.yaml")
    cases = [c for f in files for c in load_file(shared_dir / "validation" / f).cases][:90]
    texts = ("Narayanan et al. 2021, Table 2", "NVIDIA NeMo 24.12 with FSDP and torchtitan, unfused, deepspeed", "")
    for c in cases:
        want = predict_training(c)
        for text in texts:
            edited = Case.model_validate(c.model_dump() | {"source": text, "notes": text})
            assert predict_training(edited) == want, c.id


def test_the_flops_convention_is_a_field_of_the_case():
    full = predict(recompute="full")
    assert predict(recompute="full", flops_counted="model") == full          # fused attention: model FLOPs
    hw = predict(recompute="full", flops_counted="hardware")
    assert hw["tflops_per_gpu"] == pytest.approx(full["tflops_per_gpu"] * 4 / 3, rel=0.02)
    assert hw["iteration_s"] == full["iteration_s"]
    # Nothing recomputed: the two counts agree.
    assert predict(flops_counted="hardware")["tflops_per_gpu"] == predict()["tflops_per_gpu"]


def test_an_unfused_case_defaults_to_counting_the_recompute_pass():
    unfused = predict(recompute="full", attention="unfused")
    assert unfused == predict(recompute="full", attention="unfused", flops_counted="hardware")


def test_the_framework_default_is_documented_and_shown():
    case = Case.model_validate(CASE)
    assert any(d.startswith("framework: megatron") for d in defaults_taken(case))
    fsdp = copy.deepcopy(CASE)
    fsdp["training"].update(tp=1, pp=1, dp=64, zero=3, sequence_parallel=False)
    assert any(d.startswith("framework: fsdp") for d in defaults_taken(Case.model_validate(fsdp)))
    assert predict(fsdp) == predict(fsdp, framework="fsdp")
    fsdp["training"]["framework"] = "megatron"
    assert not any(d.startswith("framework") for d in defaults_taken(Case.model_validate(fsdp)))


def test_flash_is_an_alias_of_the_frameworks_default_kernel():
    # megatron: the chip generation's kernel (Transformer Engine picks by version; attention.py)
    from gpucluster.model.training.attention import resolve_on
    assert predict(attention="flash") == predict(attention=resolve_on("default", "H100-SXM5-80GB"))
    assert predict(attention="flash") != predict(attention="cudnn")
    assert predict(attention="flash", framework="fsdp", pp=1, dp=32) == \
        predict(attention="flash2", framework="fsdp", pp=1, dp=32)


def test_an_unknown_framework_names_the_valid_ones():
    with pytest.raises(Unsupported, match="torchtitan"):
        predict(framework="paxml")


def test_a_stack_or_kernel_stated_by_another_of_its_names_is_predicted_the_same():
    fsdp: dict[str, Any] = {"framework": "fsdp", "pp": 1, "dp": 32, "zero": 3}
    assert predict(**fsdp | {"framework": "FSDP2"}) == predict(**fsdp)
    assert predict(framework="megatron-core") == predict(framework="megatron")
    assert predict(attention="fa3") == predict(attention="flash3")
    assert predict(attention="te") == predict(attention="cudnn")
    assert predict(attention="fa4")["tokens_per_s_per_gpu"] > 0   # any registry kernel, not only five
    with pytest.raises(Unsupported, match="flash2"):
        predict(attention="xformers")


def test_zero3_with_context_parallelism_defaults_to_the_trainer_that_has_it():
    case = copy.deepcopy(CASE)
    case["training"].update(zero=3, pp=1, cp=2, dp=16, tp=2)
    c = Case.model_validate(case)
    assert any(d.startswith("framework: torchtitan") for d in defaults_taken(c))
    assert predict_training(c)["tokens_per_s_per_gpu"] > 0
    with pytest.raises(Unsupported, match="framework fsdp has no context parallelism"):
        predict(framework="fsdp", zero=3, pp=1, cp=2, dp=16)


def test_a_framework_rule_refusal_names_it():
    with pytest.raises(Unsupported, match="framework nanotron"):
        predict(framework="nanotron", zero=3, pp=1, dp=32)


@pytest.mark.parametrize("layout", ["Et*3|(tt|)*29,m|L", [3] + [2] * 29 + [0, 0]])
def test_61_layers_on_pp8_x_vp4_are_predicted_from_an_explicit_pipeline_layout(layout):
    case = copy.deepcopy(CASE)
    case["model"].update(layers=61, hidden=2048, heads=16, ffn_hidden=8192)
    case["training"].update(global_batch=256, tp=1, pp=8, dp=8, interleave=4, sequence_parallel=False,
                            pipeline_layout=layout)
    assert predict(case)["iteration_s"] > 0
    case["training"]["pipeline_layout"] = "Et*3|(tt|)*28,t|m|L"        # 60 layers: refused, saying so
    with pytest.raises(Unsupported, match="61"):
        predict(case)


def test_hsdp_is_a_case_field():
    case = copy.deepcopy(CASE)
    case["training"].update(tp=1, pp=1, dp=64, zero=3, sequence_parallel=False)
    assert predict(case, shard_group=8)["iteration_s"] != predict(case)["iteration_s"]
    with pytest.raises(Unsupported, match="shard_group"):
        predict(case, shard_group=48)
