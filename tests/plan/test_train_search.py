"""Layout search: valid, fitting, ranked, respecting fixed fields, and ranking like the measurements."""

import pytest

from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.layout import problems
from gpucluster.plan.train_search import search
from gpucluster.specs.workload import TransformerSpec, load_model_spec

H100 = TrainingFabric("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0)


def test_every_ranked_layout_is_valid_fits_and_is_sorted():
    spec = load_model_spec("llama3-70b")
    res = search(spec, H100, 64, 256, top=10)
    assert res.ranked and res.estimated >= len(res.ranked)
    for e in res.ranked:
        assert problems(spec, e.layout, 64) == []
        assert e.memory.fits and e.layout.gpus == 64
        assert e.layout.tp <= 8  # inside the NVLink domain
    times = [e.step_s for e in res.ranked]
    assert times == sorted(times)


def test_fixed_fields_are_kept():
    spec = load_model_spec("llama3-70b")
    res = search(spec, H100, 64, 256, fixed={"tp": 4, "pp": 4, "recompute": "selective"}, top=5)
    assert all(e.layout.tp == 4 and e.layout.pp == 4 and e.layout.recompute == "selective" for e in res.ranked)


def test_a_model_too_big_fits_nowhere():
    res = search(load_model_spec("llama3.1-405b"), H100, 8, 64)
    assert res.best is None and res.smallest_misfit is not None
    assert res.smallest_misfit.memory.total > res.smallest_misfit.memory.capacity


def test_ranking_follows_korthikanti_measurements():
    """For each model of Korthikanti et al. Table 5, SP + selective recompute beat full recompute."""
    fab = TrainingFabric("A100-SXM4-80GB", 8, 8, "InfiniBand", 25.0)
    gpt = TransformerSpec(layers=96, hidden=12288, heads=96, vocab=51200, seq_len=2048)
    base = {"tp": 8, "pp": 8, "interleave": 3, "micro_batch": 1, "zero": 0, "precision": "fp16",
            "flash_attention": False}
    full = search(gpt, fab, 64, 64, fixed={**base, "recompute": "full", "sequence_parallel": False}).best
    sel = search(gpt, fab, 64, 64, fixed={**base, "recompute": "selective", "sequence_parallel": True}).best
    assert sel is not None and full is not None
    assert sel.step_s < full.step_s
    assert full.step_s / sel.step_s == pytest.approx(18.13 / 13.75, rel=0.08)


def test_mixture_of_experts_searches_expert_parallelism():
    spec = load_model_spec("mixtral-8x7b").with_(seq_len=4096)
    res = search(spec, H100, 64, 256, top=3)
    assert res.best is not None
    assert all(spec.experts % e.layout.ep == 0 for e in res.ranked)
