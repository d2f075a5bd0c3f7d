"""A DeepSpeed config consistent with the plan's layout (batch identity, ZeRO stage, precision)."""

from __future__ import annotations

import json

from gpucluster.generate.plan_file import JobPlan


def deepspeed_config(plan: JobPlan) -> dict:
    lay = plan.layout
    prec = lay.get("precision", "bf16")
    cfg: dict = {
        # DeepSpeed checks train_batch_size == micro x accumulation x data-parallel size.
        "train_batch_size": lay["micro_batch"] * plan.grad_accum * lay["dp"],
        "train_micro_batch_size_per_gpu": lay["micro_batch"],
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": prec in ("bf16", "fp8")},
        "fp16": {"enabled": prec == "fp16"},
        "zero_optimization": {"stage": int(lay.get("zero", 0)), "overlap_comm": True,
                              "contiguous_gradients": True, "reduce_bucket_size": 5e8},
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    if lay.get("offload_optimizer"):
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if lay.get("recompute", "none") != "none":
        cfg["activation_checkpointing"] = {"partition_activations": lay["tp"] > 1,
                                           "contiguous_memory_optimization": True}
    if lay["pp"] > 1:
        cfg["pipeline"] = {"stages": lay["pp"], "partition": "parameters"}
    return cfg


def deepspeed_json(plan: JobPlan) -> str:
    return json.dumps(deepspeed_config(plan), indent=2) + "\n"
