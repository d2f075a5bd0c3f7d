"""Power caps lower throughput monotonically; small experts run their grouped GEMMs less efficiently than
large ones; expert imbalance slows the busiest rank; bad caps are refused with a reason."""

from __future__ import annotations

import itertools

import pytest

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.model.training import grouped_gemm, kernels, moe, power
from gpucluster.model.training.compute import gemm_curve
from gpucluster.model.training.layout import Layout
from gpucluster.specs.workload import TransformerSpec

LLAMA = TransformerSpec(layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True, vocab=128256,
                        seq_len=8192)


def layer_s(gpu: str) -> float:
    k = kernels.layer_kernels(LLAMA, gpu, "bf16", 1, 1, 1, False, 1, 8192, None, True)
    return k.forward_s + k.backward_s


def test_clock_falls_monotonically_with_the_cap_and_is_one_at_tdp():
    fracs = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    clocks = [power.clock_for(f) for f in fracs]
    assert clocks[0] == 1.0
    assert all(a > b for a, b in itertools.pairwise(clocks))
    # Sub-linear: a cap at 70% of TDP costs less than 30% of the clock (dynamic power ~ f^3).
    assert power.clock_for(0.7) > 0.7


def test_a_power_cap_lowers_training_throughput_monotonically():
    times = [layer_s(name) for name in ("H100", "H100@600W", "H100@500W", "H100@400W", "H100@300W")]
    assert all(a < b for a, b in itertools.pairwise(times)), times
    # Memory-bound work keeps its rate: the slowdown is less than the clock's.
    slow = times[3] / times[0]
    assert 1.0 < slow < 1.0 / power.clock_for(400 / 700)


def test_a_cap_scales_the_gemm_curve_and_says_it_is_an_estimate():
    base, capped = gemm_curve("H100", "bf16"), gemm_curve("H100@500W", "bf16")
    assert capped.eff_max == pytest.approx(base.eff_max * power.clock_for(500 / 700))
    assert "power cap 500 W" in capped.provenance and "estimate" in capped.provenance


@pytest.mark.parametrize("name", ["H100@900W", "H100@100W"])
def test_a_cap_above_tdp_or_below_the_driver_floor_is_refused(name):
    with pytest.raises(UserError, match="power_cap_w"):
        catalog.gpus.get(name)


def test_small_experts_run_their_grouped_gemms_less_efficiently_than_large_ones():
    curve = gemm_curve("H100", "bf16")
    tokens = 8192
    # Qwen3-30B-A3B: hidden 2048, 128 experts of 768 (top-8), ep 8: 16 local experts, gated fc1 2 x 768 wide.
    qwen_m = tokens * 8 * 8 / 128
    small = grouped_gemm.efficiency(curve, qwen_m, 2 * 768, 2048, 16)
    # Mixtral 8x7B: hidden 4096, 8 experts of 14336 (top-2), ep 8: one local expert.
    large = grouped_gemm.efficiency(curve, tokens * 2, 2 * 14336, 4096, 1)
    assert small < large
    # And fewer tokens per expert (more experts, same top-k) is worse still.
    assert grouped_gemm.efficiency(curve, qwen_m / 4, 2 * 768, 2048, 64) < small


def test_one_grouped_kernel_beats_a_loop_of_small_expert_gemms():
    curve = gemm_curve("H100", "bf16")
    grouped = grouped_gemm.expert_gemm_s(curve, 512, 1536, 2048, 16)
    loop = grouped_gemm.expert_gemm_s(curve, 512, 1536, 2048, 16, grouped=False)
    assert grouped[0] < loop[0] and grouped[2] == 1 and loop[2] == 16


def test_imbalance_slows_the_busiest_rank_and_has_a_documented_default():
    curve = gemm_curve("H100", "bf16")
    even = grouped_gemm.expert_gemm_s(curve, 2048, 1536, 2048, 16)[0]
    skewed = grouped_gemm.expert_gemm_s(curve, 2048, 1536, 2048, 16, imbalance=1.5)[0]
    assert skewed > 1.3 * even
    assert moe.expert_imbalance(Layout(moe_imbalance=1.25)) == 1.25
    unset = Layout()   # a layout that does not state it takes the documented default, not balanced routing
    assert unset.moe_imbalance is None
    assert moe.expert_imbalance(unset) == moe.DEFAULT_MOE_IMBALANCE > 1.0
    assert "estimate" in moe.DEFAULT_MOE_IMBALANCE_SOURCE


def test_an_unstated_imbalance_is_the_default_everywhere_and_said_so():
    from gpucluster.plan.confidence import confidence
    from gpucluster.specs.validation_case import Case
    from gpucluster.validate.training_predictor import defaults_taken, predict_training

    qwen = {"layers": 4, "hidden": 2048, "heads": 32, "kv_heads": 4, "ffn_hidden": 6144, "gated_mlp": True,
            "vocab": 151936, "seq_len": 4096, "experts": 128, "experts_per_token": 8, "moe_ffn_hidden": 768}
    training = {"global_batch": 64, "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8, "micro_batch": 1, "interleave": 1,
                "sequence_parallel": False, "recompute": "none", "zero": 1}

    def case(model: dict, **extra) -> Case:
        return Case(id="c", kind="training", hardware={"gpu": "H100-SXM5-80GB", "gpus": 8, "gpus_per_node": 8},
                    model=model, training=training | extra, measured={"tokens_per_s_per_gpu": 1.0})

    unstated, stated = case(qwen), case(qwen, moe_imbalance=moe.DEFAULT_MOE_IMBALANCE)
    assert predict_training(unstated) == predict_training(stated)
    assert predict_training(case(qwen, moe_imbalance=1.0))["tokens_per_s_per_gpu"] > \
        predict_training(unstated)["tokens_per_s_per_gpu"]
    assert any(d.startswith("moe_imbalance: ") for d in defaults_taken(unstated))
    assert not any("moe_imbalance" in d for d in defaults_taken(stated))
    dense = {k: v for k, v in qwen.items() if k not in ("experts", "experts_per_token", "moe_ffn_hidden")}
    assert not any("moe_imbalance" in d for d in defaults_taken(case(dense, ep=1)))
    # A plan names the assumption for a MoE model that does not state it, and only then.
    lay = Layout(ep=8, dp=8)
    assert any("imbalance" in a for a in confidence("H100-SXM5-80GB", lay, 0.3, moe=True).assumptions)
    assert not any("imbalance" in a for a in confidence("H100-SXM5-80GB", lay.with_(moe_imbalance=1.2), 0.3,
                                                        moe=True).assumptions)
    assert not any("imbalance" in a for a in confidence("H100-SXM5-80GB", lay, 0.3).assumptions)


def test_moe_layer_counts_the_token_permutation():
    spec = TransformerSpec(layers=4, hidden=2048, heads=32, kv_heads=4, ffn_hidden=6144, gated_mlp=True,
                           vocab=151936, seq_len=4096, experts=128, experts_per_token=8, moe_ffn_hidden=768)
    k = kernels.layer_kernels(spec, "H100", "bf16", 1, 1, 1, False, 8, 4096, False, True)
    dense_like = kernels.layer_kernels(spec.model_copy(update={"experts_per_token": 1}), "H100", "bf16", 1, 1, 1,
                                       False, 8, 4096, False, True)
    # top-8 routes 8 copies of each token through the experts and the permutation: more memory time
    assert k.memory_s > dense_like.memory_s
