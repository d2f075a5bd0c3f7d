"""DeepSeek's DualPipe schedule: its bubble, its memory, its rules, and the published layout
(DeepSeek-V3: PP16 without virtual stages, EP64) predicted rather than refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.layout import Layout, problems
from gpucluster.model.training.memory import memory
from gpucluster.model.training.step import estimate
from gpucluster.specs.validation_case import Case
from gpucluster.specs.workload import TransformerSpec
from gpucluster.validate.predictors import Unsupported
from gpucluster.validate.training_predictor import defaults_taken, predict_training

DENSE = TransformerSpec(layers=32, hidden=4096, heads=32, vocab=32000, seq_len=4096)
FAB = TrainingFabric("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0)
ONE_F_ONE_B = Layout(tp=8, pp=8, dp=1, micro_batch=1, global_batch=32, recompute="selective", zero=1,
                     sequence_parallel=True, framework="deepseek")
DUALPIPE = ONE_F_ONE_B.with_(moe_overlap="dualpipe")   # deepseek's default, stated


def test_dualpipe_bubble_is_the_reports_formula_and_smaller_than_1f1b():
    plain, dual = estimate(DENSE, ONE_F_ONE_B, FAB), estimate(DENSE, DUALPIPE, FAB)
    assert DUALPIPE.dualpipe_schedule and not ONE_F_ONE_B.dualpipe_schedule
    # A dense model: the overlap has nothing to hide, so only the schedule differs.
    assert dual.terms["compute"] == pytest.approx(plain.terms["compute"])
    t_mb = plain.terms["pp_bubble"] / (8 - 1)      # 1F1B: (pp - 1) x (F + B)
    # DualPipe: (pp/2 - 1) x (F + B/2), between (pp/2 - 1) x t_mb / 2 and (pp/2 - 1) x t_mb.
    assert 3 * t_mb / 2 < dual.terms["pp_bubble"] < 3 * t_mb
    assert dual.step_s < plain.step_s


def test_dualpipe_holds_two_stages_per_rank_and_pp_plus_one_micro_batches():
    plain, dual = memory(DENSE, ONE_F_ONE_B, 80e9, 4096), memory(DENSE, DUALPIPE, 80e9, 4096)
    assert dual.weights == pytest.approx(2 * plain.weights)
    assert dual.grads == pytest.approx(2 * plain.grads)
    assert dual.optimizer == pytest.approx(2 * plain.optimizer)
    # 1F1B's first stage holds pp (8) micro batches; DualPipe pp + 1 on every rank.
    assert dual.activations > plain.activations


def test_dualpipe_rules_name_dualpipe():
    assert not problems(DENSE, DUALPIPE.with_(pp=4, dp=2, tp=4, global_batch=16), 32)   # 8 = 2 x pp
    three = Layout(tp=1, pp=3, dp=1, global_batch=12, moe_overlap="dualpipe", framework="deepseek")
    spec = TransformerSpec(layers=30, hidden=1024, heads=16, vocab=32000, seq_len=1024)
    assert any("DualPipe" in p and "even" in p for p in problems(spec, three, 3))
    few = DUALPIPE.with_(global_batch=8)   # 8 micro batches < 2 x pp
    assert any("DualPipe" in p and "2 x pp (16)" in p for p in problems(DENSE, few, 64))
    assert not problems(DENSE, DUALPIPE, 64)
    # Megatron-Core (megatron, nemo) has no DualPipe: the same layout breaks its overlap rule and
    # runs nothing of DualPipe's; the schedule is the framework's, not a special case of the search.
    for name in ("megatron", "nemo"):
        mcore = DUALPIPE.with_(framework=name)
        assert not mcore.dualpipe_schedule
        assert any("Megatron-Core" in p and "interleave > 1" in p for p in problems(DENSE, mcore, 64))
    assert not problems(DENSE, DUALPIPE.with_(framework="megatron", interleave=2, global_batch=32), 64)


DSV3: dict[str, Any] = {
    "id": "dsv3", "kind": "training", "source": "DeepSeek-V3 technical report",
    "hardware": {"gpu": "H800", "gpus": 2048, "gpus_per_node": 8,
                 "scale_out": {"type": "infiniband", "gbps_per_nic": 400, "nics_per_node": 8}},
    "model": {"layers": 61, "hidden": 7168, "heads": 128, "attention": "mla", "q_lora_rank": 1536,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
              "ffn_hidden": 18432, "gated_mlp": True, "vocab": 129280, "seq_len": 4096, "experts": 256,
              "experts_per_token": 8, "moe_ffn_hidden": 2048, "shared_experts": 1, "dense_layers": 3,
              "moe_max_nodes": 4},
    "training": {"global_batch": 15360, "tp": 1, "pp": 16, "ep": 64, "dp": 128, "cp": 1, "precision": "fp8",
                 "zero": 1, "moe_overlap": "dualpipe"},
    "measured": {"tokens_per_s_per_gpu": 1543.0},
}


def test_deepseek_v3_layout_as_published_is_predicted_as_dualpipe():
    case = Case.model_validate(DSV3)
    pred = predict_training(case)
    assert pred["tokens_per_s_per_gpu"] > 0
    assert any(d.startswith("framework: deepseek") for d in defaults_taken(case))
    # Stated as Megatron, the same layout breaks Megatron-Core's rule, and the refusal says which.
    megatron = copy.deepcopy(DSV3)
    megatron["training"]["framework"] = "megatron"
    with pytest.raises(Unsupported, match=r"Megatron-Core \(megatron\) overlaps the expert all-to-all only with virtual stages"):
        predict_training(Case.model_validate(megatron))
