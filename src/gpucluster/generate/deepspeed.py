"""A DeepSpeed config consistent with the plan's layout (batch identity, ZeRO stage, precision),
and a warning for each part of the layout a DeepSpeed JSON config cannot express.

DeepSpeed checks `train_batch_size == micro x accumulation x world_size`, where world_size is
the data-parallel size: the mpu's (Megatron-DeepSpeed) or, without one, all ranks divided by
`sequence_parallel_size`. The plan's dp is GPUs / (tp x pp x cp), so context parallelism must
not be counted as data parallelism: it is written as `sequence_parallel_size`, DeepSpeed's
Ulysses sequence parallelism (the only kind DeepSpeed has; it splits heads with an all-to-all,
where the planner modelled Megatron's ring), and said so on stderr."""

from __future__ import annotations

import json

from gpucluster.errors import UserError
from gpucluster.generate.plan_file import JobPlan


def _dp(plan: JobPlan) -> int:
    lay = plan.layout
    dp = plan.gpus // (lay["tp"] * lay["pp"] * lay.get("cp", 1))
    if dp != lay["dp"]:   # plan_file refuses such a plan; kept as a guard for plans built in code
        raise UserError(f"{lay['dp']} is not GPUs / (tp x pp x cp) = {dp}", file=plan.source or None,
                        field="best.layout.dp")
    return dp


def deepspeed_config(plan: JobPlan) -> dict:
    lay = plan.layout
    prec = lay.get("precision", "bf16")
    zero = int(lay.get("zero", 0))

    def refuse(key: str, reason: str) -> UserError:
        return UserError(reason, file=plan.source or None, field=f"best.layout.{key}")

    if zero >= 2 and lay["pp"] > 1:
        raise refuse("zero", f"DeepSpeed's pipeline engine runs ZeRO 0 or 1 only; the plan has zero={zero} with "
                             f"pp={lay['pp']}")
    if lay.get("offload_optimizer") and zero == 0:
        raise refuse("offload_optimizer", "DeepSpeed offloads the optimizer only under ZeRO (zero >= 1)")
    dp = _dp(plan)
    micro, accum = lay["micro_batch"], plan.grad_accum
    cfg: dict = {
        "train_batch_size": micro * accum * dp,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": prec in ("bf16", "fp8")},
        "fp16": {"enabled": prec == "fp16"},
        "zero_optimization": {"stage": zero, "overlap_comm": bool(lay.get("overlap_dp_comm", True)),
                              "contiguous_gradients": True, "reduce_bucket_size": 5e8},
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    if zero == 3 and lay.get("zero3_prefetch_params"):
        # The planner's ZeRO-3 gather window is DeepSpeed's prefetch bucket (in parameters).
        cfg["zero_optimization"]["stage3_prefetch_bucket_size"] = int(lay["zero3_prefetch_params"])
    if lay.get("cp", 1) > 1:
        cfg["sequence_parallel_size"] = lay["cp"]
    if lay.get("offload_optimizer"):
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if lay.get("recompute", "none") != "none":
        cfg["activation_checkpointing"] = {"partition_activations": lay["tp"] > 1,
                                           "contiguous_memory_optimization": True}
    if lay["pp"] > 1:
        # "uniform": as many layers per stage, the planner's split (not balanced by parameters).
        cfg["pipeline"] = {"stages": lay["pp"], "partition": "uniform"}
    return cfg


def deepspeed_warnings(plan: JobPlan) -> list[str]:
    """One line each: what of the plan the DeepSpeed JSON does not carry, so the run differs
    from the prediction unless the program sets it up."""
    lay, src = plan.layout, plan.source
    out = []
    if lay.get("cp", 1) > 1:
        out.append(f"{src}: best.layout.cp: DeepSpeed has no ring context parallelism; sequence_parallel_size="
                   f"{lay['cp']} asks for Ulysses (all-to-all over heads), whose traffic differs from the plan's")
    if lay.get("interleave", 1) > 1:
        out.append(f"{src}: best.layout.interleave: DeepSpeed's pipeline engine has no interleaved schedule; "
                   f"it runs plain 1F1B, with a larger bubble than the plan's {lay['interleave']} virtual stages")
    if lay["tp"] > 1:
        out.append(f"{src}: best.layout.tp: a DeepSpeed config does not set tensor parallelism ({lay['tp']}); "
                   "the program must (Megatron-DeepSpeed's mpu, or DeepSpeed AutoTP)")
    if lay.get("ep", 1) > 1:
        out.append(f"{src}: best.layout.ep: a DeepSpeed config does not set expert parallelism ({lay['ep']}); "
                   "the program must (deepspeed.moe.layer.MoE ep_size)")
    split = _pipeline_split_note(plan)
    if split:
        out.append(split)
    if lay.get("precision") == "fp8":
        out.append(f"{src}: best.layout.precision: DeepSpeed has no fp8 setting; the config enables bf16 and "
                   "fp8 GEMMs must come from the program (Transformer Engine)")
    return out


def _pipeline_split_note(plan: JobPlan) -> str | None:
    """The plan's layers per stage, when a uniform split of the transformer layers is not it: a
    DeepSpeed JSON config cannot say how PipelineModule partitions (its `partition_method`
    argument, in the program, does), so the line names the split to reproduce."""
    from gpucluster.generate.megatron import plan_stage_layers

    lay = plan.layout
    pp = lay["pp"]
    emb, loss = bool(lay.get("pp_embedding_layer")), bool(lay.get("pp_loss_layer"))
    if pp == 1 or plan.layers is None or not (emb or loss or plan.layers % pp):
        return None
    counts = plan_stage_layers(plan.layers, pp, emb, loss)
    what = " and ".join(w for w, on in (("the embedding", emb), ("the loss", loss)) if on)
    counted = f" ({what} counted as a layer on the first/last stage)" if what else ""
    return (f"{plan.source}: best.layout.pp: a DeepSpeed config cannot set the pipeline split; the plan's "
            f"{pp} stages hold {counts} transformer layers{counted}: give PipelineModule a partition_method "
            "that reproduces it")


def deepspeed_json(plan: JobPlan) -> str:
    return json.dumps(deepspeed_config(plan), indent=2) + "\n"
