"""Published shapes from the stacks, chips and scales the shared files do not hold (small-expert
MoE, GB200 NVL72, Blackwell long context with context parallelism, explicit pipeline layouts,
HSDP, AMD FP8, sliding-window attention, DualPipe): each is predicted, none refused. The
measured values are placeholders; these cases check that a layout someone ran is taken as
written, not how close the prediction is (benchmarks/ and docs/validation.md do that)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.specs.validation_case import Case
from gpucluster.validate.training_predictor import predict_training

IB8 = {"type": "infiniband", "gbps_per_nic": 400, "nics_per_node": 8}
LLAMA3_8B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "gated_mlp": True,
             "vocab": 128256, "seq_len": 8192}
LLAMA3_405B = {"layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248, "gated_mlp": True,
               "vocab": 128256, "seq_len": 8192}

CASES: dict[str, dict[str, Any]] = {
    "qwen3-30b-a3b: 128 experts of width 768, EP8": {
        "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 64, "gpus_per_node": 8, "scale_out": IB8},
        "model": {"layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128, "ffn_hidden": 6144,
                  "gated_mlp": True, "vocab": 151936, "seq_len": 4096, "experts": 128, "experts_per_token": 8,
                  "moe_ffn_hidden": 768},
        "training": {"global_batch": 512, "tp": 1, "pp": 1, "ep": 8, "dp": 64, "cp": 1, "micro_batch": 2,
                     "interleave": 1, "sequence_parallel": False, "recompute": "selective", "zero": 1}},
    "llama3-405b on a GB200 NVL72 pod, FP8": {
        "hardware": {"gpu": "GB200", "gpus": 576, "gpus_per_node": 4, "scale_up_domain": 72,
                     "scale_out": {"type": "infiniband", "gbps_per_nic": 400, "nics_per_node": 4}},
        "model": LLAMA3_405B,
        "training": {"global_batch": 288, "tp": 8, "pp": 9, "cp": 2, "dp": 4, "micro_batch": 1, "precision": "fp8",
                     "interleave": 7, "zero": 1, "sequence_parallel": True, "recompute": "none"}},
    "llama3.1-405b with Megatron-Core's explicit pipeline layout": {
        "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 1024, "gpus_per_node": 8, "scale_out": IB8},
        "model": LLAMA3_405B,
        "training": {"global_batch": 512, "tp": 8, "pp": 8, "cp": 2, "dp": 8, "micro_batch": 1, "interleave": 8,
                     "zero": 1, "sequence_parallel": True, "recompute": "none", "pipeline_layout": "Et|(tt|)*62tL"}},
    "llama3-70b with HSDP over 64-GPU shard groups": {
        "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 256, "gpus_per_node": 8,
                     "scale_out": {"type": "roce", "gbps_per_nic": 400, "nics_per_node": 8}},
        "model": LLAMA3_405B | {"layers": 80, "hidden": 8192, "heads": 64, "ffn_hidden": 28672},
        "training": {"global_batch": 256, "tp": 1, "pp": 1, "dp": 256, "cp": 1, "micro_batch": 1, "zero": 3,
                     "shard_group": 64, "recompute": "full", "framework": "fsdp"}},
    "llama3-8b on MI325X in FP8, layout searched": {
        "hardware": {"gpu": "MI325X", "gpus": 8, "gpus_per_node": 8},
        "model": LLAMA3_8B, "training": {"global_batch": 64, "precision": "fp8"}},
    "llama3-70b at 128K on B200 with cuDNN attention and CP8": {
        "hardware": {"gpu": "B200", "gpus": 64, "gpus_per_node": 8, "scale_out": IB8},
        "model": LLAMA3_405B | {"layers": 80, "hidden": 8192, "heads": 64, "ffn_hidden": 28672, "seq_len": 131072},
        "training": {"global_batch": 4, "tp": 8, "cp": 8, "pp": 1, "dp": 1, "attention": "cudnn"}},
    "gemma-style sliding window, tied embeddings, torchtitan": {
        "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 16, "gpus_per_node": 8, "scale_out": IB8},
        "model": {"layers": 42, "hidden": 3584, "heads": 16, "kv_heads": 8, "head_dim": 256, "ffn_hidden": 14336,
                  "gated_mlp": True, "vocab": 256000, "seq_len": 8192, "sliding_window": 4096,
                  "tied_embeddings": True},
        "training": {"global_batch": 64, "framework": "torchtitan"}},
    "BLOOM-style Megatron-DeepSpeed, 384 A100": {
        "hardware": {"gpu": "A100-SXM4-80GB", "gpus": 384, "gpus_per_node": 8,
                     "scale_out": {"type": "infiniband", "gbps_per_nic": 100, "nics_per_node": 4}},
        "model": {"layers": 70, "hidden": 14336, "heads": 112, "vocab": 250880, "seq_len": 2048},
        "training": {"global_batch": 2048, "micro_batch": 2, "tp": 4, "pp": 12, "dp": 8, "cp": 1, "ep": 1,
                     "interleave": 1, "sequence_parallel": False, "recompute": "full", "zero": 1,
                     "attention": "unfused", "framework": "deepspeed"}},
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_published_shape_from_another_stack_is_predicted(name):
    case = Case.model_validate({"id": "x", "kind": "training", "source": name, "measured": {"iteration_s": 1.0},
                                **CASES[name]})
    pred = predict_training(case)
    assert pred["iteration_s"] > 0 and 0 < pred["mfu"] < 1
