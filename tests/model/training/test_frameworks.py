"""Training stacks as an input: the registry, FSDP as frameworks run it, HSDP, explicit pipelines."""

from __future__ import annotations

import pytest

from gpucluster.model.training import frameworks
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.kernels import layer_kernels
from gpucluster.model.training.layout import Layout, problems
from gpucluster.model.training.memory import memory
from gpucluster.model.training.step import estimate
from gpucluster.model.transformer_params import parse_pipeline_layout, stage_layer_counts
from gpucluster.specs.workload import TransformerSpec

LLAMA7B = TransformerSpec(layers=32, hidden=4096, heads=32, ffn_hidden=11008, gated_mlp=True, vocab=32000,
                          seq_len=4096)
# 8 A100 per node, 4 x 100 Gb/s RoCE per node (6.25 GB/s per GPU): fms-fsdp's cluster.
A100_ROCE = TrainingFabric("A100-SXM4-80GB", 8, 8, "RoCE", 6.25)
A100_IB = TrainingFabric("A100-SXM4-80GB", 8, 8, "InfiniBand", 25.0)


def test_an_unknown_framework_is_an_error_naming_the_valid_ones():
    with pytest.raises(ValueError) as exc:
        frameworks.get("jax")
    for name in ("megatron", "nemo", "deepspeed", "fsdp", "torchtitan", "nanotron"):
        assert name in str(exc.value)
    assert any("unknown framework" in w for w in problems(LLAMA7B, Layout(dp=8, global_batch=8, framework="x"), 8))


def test_every_framework_states_its_sources_and_a_known_attention_kernel():
    for fw in frameworks.FRAMEWORKS.values():
        assert fw.source and fw.title and fw.checkpoint
        assert fw.attention in ("default", "flash2", "flash3", "cudnn")
        assert 0 <= fw.max_zero <= 3


def test_a_refusal_names_the_framework_rule_it_breaks():
    lay = Layout(dp=8, global_batch=8, zero=3, framework="nanotron")
    assert any("framework nanotron" in w and "ZeRO" in w for w in problems(LLAMA7B, lay, 8))
    piped = Layout(pp=2, dp=4, global_batch=8, framework="fsdp")
    assert any("framework fsdp" in w and "pipeline" in w for w in problems(LLAMA7B, piped, 8))


def test_eager_element_wise_ops_cost_more_than_fused_kernels():
    def fwd(framework: str) -> float:
        k = layer_kernels(LLAMA7B, "A100-SXM4-80GB", "bf16", 2, 1, 1, False, 1, 4096, None, True,
                          framework=framework)
        return k.forward()
    assert fwd("fsdp") > fwd("megatron")
    assert fwd("megatron") == fwd("nemo")                   # the same Megatron-Core kernels


def test_fused_kernels_are_an_input_of_the_stack():
    # An FSDP trainer that runs fused kernels (lit-gpt with flash-attn's RMSNorm and rotary, Liger)
    # states it: its element-wise chains cost what Megatron-Core's do, and keep no eager activations.
    def layer(**kw) -> float:
        k = layer_kernels(LLAMA7B, "A100-SXM4-80GB", "bf16", 2, 1, 1, False, 1, 4096, None, True, **kw)
        return k.forward_s + k.backward_s
    assert layer(framework="fsdp", fused_kernels=True) == layer(framework="megatron")
    assert layer(framework="megatron", fused_kernels=False) == layer(framework="fsdp")
    eager, fused = _fsdp(64), _fsdp(64, fused_kernels=True)
    assert estimate(LLAMA7B, fused, A100_IB).step_s < estimate(LLAMA7B, eager, A100_IB).step_s
    assert memory(LLAMA7B, fused, 80 * 2**30, 4096).activations < memory(LLAMA7B, eager, 80 * 2**30, 4096).activations
    assert "fused-kernels=on" in fused.short()


def _fsdp(dp: int, **kw) -> Layout:
    return Layout(dp=dp, micro_batch=2, global_batch=2 * dp, zero=3, framework="fsdp", **kw)


def test_fsdp_gathers_one_flat_parameter_per_block_not_one_per_tensor():
    # DeepSpeed's per-parameter fetch pays a ring's latency per tensor at 512 GPUs; FSDP pays it per block.
    per_unit = estimate(LLAMA7B, _fsdp(512), A100_IB).terms["dp_comm"]
    per_param = estimate(LLAMA7B, _fsdp(512).with_(framework="deepspeed"), A100_IB).terms["dp_comm"]
    assert per_param > 3 * per_unit


@pytest.mark.parametrize("fab", [A100_IB, TrainingFabric("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0)])
def test_a_sharded_runs_step_changes_a_few_percent_from_128_to_512_gpus(fab):
    # Fixed per-GPU batch: each GPU gathers and reduces the same bytes per block at any scale;
    # only the rings' latency grows (PyTorch FSDP paper, Zhao et al. 2023: near-linear scaling).
    t128, t512 = (estimate(LLAMA7B, _fsdp(n), fab).step_s for n in (128, 512))
    assert t128 * 0.999 <= t512 < 1.05 * t128


def test_hsdp_keeps_gathers_inside_the_shard_group_and_costs_memory():
    full, hsdp = _fsdp(128), _fsdp(128, shard_group=8)
    t_full, t_hsdp = (estimate(LLAMA7B, lay, A100_ROCE).terms["dp_comm"] for lay in (full, hsdp))
    assert t_hsdp < t_full                                       # only 1/8 of the gradient crosses the network
    m_full, m_hsdp = (memory(LLAMA7B, lay, 80e9, 4096) for lay in (full, hsdp))
    assert m_hsdp.optimizer == pytest.approx(16 * m_full.optimizer)   # sharded over 8 instead of 128
    assert problems(LLAMA7B, _fsdp(128, shard_group=48), 128)          # must divide dp x cp


def test_ring_allreduce_buckets_pay_latency_at_scale():
    # The same gradients in 25 MB buckets (PyTorch DDP, nanotron) take longer than in
    # Megatron-Core's max(40M, 1M x dp) parameter buckets at 512 GPUs.
    lay = Layout(tp=1, dp=512, micro_batch=1, global_batch=512, zero=0, overlap_dp_comm=False)
    megatron = estimate(LLAMA7B, lay, A100_IB).terms["dp_comm"]
    nanotron = estimate(LLAMA7B, lay.with_(framework="nanotron"), A100_IB).terms["dp_comm"]
    assert nanotron > megatron      # smaller buckets and fp32 gradients


def test_megatron_core_pipeline_layout_strings_place_61_layers():
    # DeepSeek-V3's published layouts: 61 layers (+ embedding, MTP and loss) on PP8 x VP4 and PP4 x VP4.
    pp8 = parse_pipeline_layout("Et*3|(tt|)*29,m|L")
    assert len(pp8) == 32 and sum(pp8) == 61
    counts = stage_layer_counts(61, 8, stages=pp8)
    assert sum(counts) == 61 and counts[0] == 3 + 2 * 3     # chunks 0, 8, 16, 24 run on rank 0
    pp4 = parse_pipeline_layout("Et|" + "(tttt|)*15" + "L")
    assert len(pp4) == 17 or sum(pp4) == 61
    with pytest.raises(ValueError):
        parse_pipeline_layout("Et*3|x|L")


def test_an_explicit_pipeline_layout_is_checked_against_the_model():
    spec = TransformerSpec(layers=61, hidden=2048, heads=16, vocab=32000, seq_len=2048)
    stages = tuple([4] * 15 + [1])
    lay = Layout(pp=4, interleave=4, dp=2, global_batch=8, stage_layers=stages)
    assert problems(spec, lay, 8) == []
    assert estimate(spec, lay, A100_IB).step_s > 0
    assert problems(spec, lay.with_(stage_layers=stages[:-1]), 8)            # 15 stages for pp x v = 16
    assert problems(spec, lay.with_(stage_layers=(4,) * 16), 8)              # 64 layers, the model has 61


def test_torch_compile_fuses_what_eager_pytorch_runs_op_by_op():
    def fwd(framework: str, compiled: bool | None) -> float:
        # One attention kernel for all three: the frameworks' default kernels differ (megatron: cuDNN).
        return layer_kernels(LLAMA7B, "A100-SXM4-80GB", "bf16", 2, 1, 1, False, 1, 4096, None, True,
                             kernel="flash2", framework=framework, torch_compile=compiled).forward()
    assert fwd("torchtitan", True) == fwd("megatron", None) < fwd("torchtitan", None)
    eager = memory(LLAMA7B, _fsdp(8), 80e9, 4096).activations
    assert memory(LLAMA7B, _fsdp(8, torch_compile=True), 80e9, 4096).activations < eager


def test_stacks_without_fused_gradient_accumulation_pay_a_pass_per_micro_batch():
    from gpucluster.model.training.compute import elementwise_time_s
    from gpucluster.model.training.step import GRAD_ACCUM_BYTES_PER_PARAM
    from gpucluster.model.transformer_memory import weight_grad_optimizer_bytes

    lay = Layout(tp=2, pp=2, dp=2, micro_batch=1, global_batch=16, zero=1, sequence_parallel=True)  # 8 micro batches
    megatron = estimate(LLAMA7B, lay, A100_IB)
    deepspeed = estimate(LLAMA7B, lay.with_(framework="deepspeed"), A100_IB)
    local = weight_grad_optimizer_bytes(LLAMA7B, 2, 2, 2, 1, 0, "bf16")["params"]
    extra = 7 * elementwise_time_s("A100-SXM4-80GB", local * GRAD_ACCUM_BYTES_PER_PARAM)
    assert deepspeed.terms["compute"] - megatron.terms["compute"] == pytest.approx(extra, rel=1e-9)
    assert frameworks.get("megatron").grad_accum_fused and not frameworks.get("fsdp").grad_accum_fused
    # One micro batch per step has nothing to accumulate; ZeRO-3 keeps no full local gradient.
    one = lay.with_(global_batch=2)
    assert estimate(LLAMA7B, one.with_(framework="deepspeed"), A100_IB).terms["compute"] == \
        pytest.approx(estimate(LLAMA7B, one, A100_IB).terms["compute"])
    from gpucluster.model.training.step import _grad_accumulation_s
    assert _grad_accumulation_s(lay.with_(framework="fsdp"), A100_IB, local) == pytest.approx(extra)
    assert _grad_accumulation_s(Layout(dp=8, global_batch=64, zero=3, framework="fsdp"), A100_IB, local) == 0
    assert _grad_accumulation_s(Layout(dp=8, global_batch=64, zero=2, framework="deepspeed"), A100_IB, local) == 0
