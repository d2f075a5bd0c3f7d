"""A plan's layout as Megatron-LM arguments that run that layout, or a refusal saying why not.

Argument names are Megatron-LM's (megatron/training/arguments.py). Megatron-LM builds
megatron-core's TransformerConfig, DistributedDataParallelConfig and OptimizerConfig by copying
the arguments of the same name (`core_transformer_config_from_args`, `get_model`), so each flag
below maps to a field of those dataclasses (MEGATRON_FLAGS); the tests check the names against
the installed megatron-core and run its own TransformerConfig validation on the values.

Decisions (docs/engines.md):
- ZeRO-1 is Megatron's distributed optimizer. Megatron-LM has no `--zero-stage`: ZeRO-2 and
  ZeRO-3 are Megatron-FSDP (`--use-megatron-fsdp`, `--data-parallel-sharding-strategy`
  optim_grads / optim_grads_params: gradients / gradients and parameters sharded too), which
  runs on the distributed optimizer. Refused with pp > 1 (gradients are sharded every micro batch).
- Pipeline stages: Megatron splits layers evenly and refuses `--pipeline-model-parallel-size`
  alone when pp does not divide them. The plan's split (model/transformer_params.stage_layer_counts)
  is written as `--decoder-first/last-pipeline-num-layers` when the middle stages are even, else
  as `--pipeline-model-parallel-layout` (megatron-core >= 0.13), stage by stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.errors import UserError
from gpucluster.generate.plan_file import JobPlan
from gpucluster.model.training import frameworks

# Every flag this module writes, and the megatron-core config field it sets (None: a
# training-loop argument that no core config holds). Sources: megatron-core 0.16.1's
# TransformerConfig/ModelParallelConfig, DistributedDataParallelConfig, OptimizerConfig
# (field metadata `argparse_meta` gives `--fp8-format` for `fp8`); Megatron-LM arguments.py
# (`--decoder-first-pipeline-num-layers` -> num_layers_in_first_pipeline_stage, ...).
MEGATRON_FLAGS: dict[str, str | None] = {
    "--tensor-model-parallel-size": "tensor_model_parallel_size",
    "--pipeline-model-parallel-size": "pipeline_model_parallel_size",
    "--context-parallel-size": "context_parallel_size",
    "--expert-model-parallel-size": "expert_model_parallel_size",
    "--num-virtual-stages-per-pipeline-rank": "virtual_pipeline_model_parallel_size",
    "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
    "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
    "--pipeline-model-parallel-layout": "pipeline_model_parallel_layout",
    "--account-for-embedding-in-pipeline-split": "account_for_embedding_in_pipeline_split",
    "--account-for-loss-in-pipeline-split": "account_for_loss_in_pipeline_split",
    "--sequence-parallel": "sequence_parallel",
    "--recompute-granularity": "recompute_granularity",
    "--recompute-method": "recompute_method",
    "--recompute-num-layers": "recompute_num_layers",
    "--bf16": "bf16",
    "--fp16": "fp16",
    "--fp8-format": "fp8",
    "--attention-backend": "attention_backend",
    "--tp-comm-overlap": "tp_comm_overlap",
    "--overlap-moe-expert-parallel-comm": "overlap_moe_expert_parallel_comm",
    "--moe-token-dispatcher-type": "moe_token_dispatcher_type",
    "--moe-flex-dispatcher-backend": "moe_flex_dispatcher_backend",
    "--use-distributed-optimizer": "use_distributed_optimizer",
    "--use-megatron-fsdp": "use_megatron_fsdp",
    "--data-parallel-sharding-strategy": "data_parallel_sharding_strategy",
    "--overlap-grad-reduce": "overlap_grad_reduce",
    "--overlap-param-gather": "overlap_param_gather",
    "--optimizer-cpu-offload": "optimizer_cpu_offload",
    "--optimizer-offload-fraction": "optimizer_offload_fraction",
    "--ckpt-format": None,
    "--use-precision-aware-optimizer": "use_precision_aware_optimizer",
    "--micro-batch-size": None,
    "--global-batch-size": None,
    "--seq-length": None,
}

# Megatron-FSDP's sharding strategy for each ZeRO stage above 1.
FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}


@dataclass
class MegatronArgs:
    args: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # one line each, for stderr
    # Environment the job must set (None: must be unset), with why; validate_args checks it.
    env: dict[str, str | None] = field(default_factory=dict)


def plan_stage_layers(layers: int, pp: int, embedding: bool = False, loss: bool = False) -> list[int]:
    """Transformer layers per pipeline stage as the planner splits them (the planner's own
    function: as even as possible, extra layers to the middle stages first, then the last,
    then the first; the embedding and the loss, when counted, take one layer's place)."""
    from gpucluster.model.transformer_params import stage_layer_counts

    return stage_layer_counts(layers, pp, embedding, loss)


def layout_string(counts: list[int]) -> str:
    """`--pipeline-model-parallel-layout` for one layer count per stage: E (embedding) on the
    first stage, L (loss) on the last, t per transformer layer, '|' between stages; repeated
    middle stages as `(ttt|)*16` (megatron-core PipelineParallelLayerLayout.from_str)."""
    stages = [("E" if i == 0 else "") + "t" * n + ("L" if i == len(counts) - 1 else "")
              for i, n in enumerate(counts)]
    out, i = [], 0
    while i < len(stages) - 1:
        j = i
        while j + 1 < len(stages) - 1 and stages[j + 1] == stages[i]:
            j += 1
        run = j - i + 1
        out.append(f"({stages[i]}|)*{run}" if run > 1 else f"{stages[i]}|")
        i = j + 1
    return "".join(out) + stages[-1]


def megatron_args(plan: JobPlan) -> MegatronArgs:
    lay = plan.layout
    res = MegatronArgs()
    out = res.args

    def refuse(key: str, reason: str) -> UserError:
        return UserError(reason, file=plan.source or None, field=f"best.layout.{key}")

    out += [f"--tensor-model-parallel-size={lay['tp']}", f"--pipeline-model-parallel-size={lay['pp']}",
            f"--micro-batch-size={lay['micro_batch']}", f"--global-batch-size={lay['global_batch']}",
            f"--seq-length={plan.seq_len}"]
    if lay.get("cp", 1) > 1:
        out.append(f"--context-parallel-size={lay['cp']}")
    if lay.get("ep", 1) > 1:
        out.append(f"--expert-model-parallel-size={lay['ep']}")
    if lay.get("interleave", 1) > 1:
        out.append(f"--num-virtual-stages-per-pipeline-rank={lay['interleave']}")
    _pipeline_split(plan, res, refuse)
    if lay.get("sequence_parallel"):
        out.append("--sequence-parallel")
    recompute = lay.get("recompute", "none")
    if recompute == "full":
        # Megatron refuses full granularity without a method; the plan's "full" recomputes every
        # layer from its input: uniform, one layer per checkpoint.
        out += ["--recompute-granularity=full", "--recompute-method=uniform", "--recompute-num-layers=1"]
    elif recompute == "selective":
        out.append("--recompute-granularity=selective")
    prec = lay.get("precision", "bf16")
    out += {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format=hybrid"]}[prec]
    if not lay.get("flash_attention", True):
        out.append("--attention-backend=unfused")   # the plan keeps attention scores in HBM
    _data_parallel(plan, out, refuse)
    if lay.get("overlap_tp_comm"):
        if not lay.get("sequence_parallel"):
            raise refuse("overlap_tp_comm", "Megatron-LM overlaps TP communication with GEMMs only under "
                                            "sequence parallelism (sequence_parallel is false)")
        out.append("--tp-comm-overlap")
    _moe(plan, res, refuse)
    fw = lay.get("framework", "megatron")
    stack = frameworks.FRAMEWORKS.get(fw)
    if stack is not None and not stack.megatron_core:
        # The layout carries over; the stack does not: Megatron-LM runs Megatron-Core's kernels and overlap
        # (a Megatron-Core plan, megatron or NeMo's recipes, predicted the job these arguments start).
        res.warnings.append(f"{plan.source}: best.layout.framework: the plan is {fw}'s (its kernels, overlap and "
                            "sharding set the predicted step time); these are Megatron-LM's arguments for the same "
                            "layout, which runs Megatron-Core's: plan with --framework megatron for this job's figure")
    _environment(plan, res)
    return res


# Megatron-LM validate_args (arguments.py): before Blackwell, tensor or context parallelism needs
# CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue, so that a communication kernel is launched
# before the GEMM it overlaps); Megatron-FSDP needs it unset (its all-gathers and
# reduce-scatters run on their own streams). Setting 1 on Blackwell is harmless.
CONNECTIONS = "CUDA_DEVICE_MAX_CONNECTIONS"


def _environment(plan: JobPlan, res: MegatronArgs) -> None:
    lay = plan.layout
    if "--use-megatron-fsdp" in res.args:
        res.env[CONNECTIONS] = None
    elif lay["tp"] > 1 or lay.get("cp", 1) > 1:
        res.env[CONNECTIONS] = "1"


def _pipeline_split(plan: JobPlan, res: MegatronArgs, refuse) -> None:
    lay = plan.layout
    pp, v = lay["pp"], lay.get("interleave", 1)
    emb, loss = bool(lay.get("pp_embedding_layer")), bool(lay.get("pp_loss_layer"))
    if pp == 1:
        return
    account = (["--account-for-embedding-in-pipeline-split"] if emb else []) + \
              (["--account-for-loss-in-pipeline-split"] if loss else [])
    layers = plan.layers
    if layers is None:
        res.args.extend(account)
        res.warnings.append(f"{plan.source}: best.layout.pp: the plan does not give the layer count of "
                            f"{plan.model} (not a preset): check that Megatron-Core can split it into pp={pp} "
                            f"stages{f' x {v} virtual' if v > 1 else ''}")
        return
    if pp > layers:
        raise refuse("pp", f"{pp} pipeline stages for {layers} layers")
    total = layers + int(emb) + int(loss)
    what = f"layers ({layers}{' + embedding' if emb else ''}{' + loss' if loss else ''})"
    if v > 1:
        # The interleaved schedule gives every virtual stage the same layers: no uneven split.
        if total % (pp * v):
            raise refuse("interleave", f"{what} is not a multiple of pp x interleave ({pp} x {v}); "
                                       "Megatron-Core's interleaved schedule needs even virtual stages")
        res.args.extend(account)
        return
    if total % pp == 0:
        res.args.extend(account)   # Megatron's even split is the plan's
        return
    counts = plan_stage_layers(layers, pp, emb, loss)
    if not emb and not loss and len(set(counts[1:-1])) <= 1:
        res.args += [f"--decoder-first-pipeline-num-layers={counts[0]}",
                     f"--decoder-last-pipeline-num-layers={counts[-1]}"]
    else:
        # The layout cannot be combined with the account-for flags; it places E and L itself.
        res.args.append(f"--pipeline-model-parallel-layout={layout_string(counts)}")


def _data_parallel(plan: JobPlan, out: list[str], refuse) -> None:
    lay = plan.layout
    zero = lay.get("zero", 0)
    if zero >= 2:
        if lay["pp"] > 1:
            raise refuse("zero", f"ZeRO-{zero} with pp={lay['pp']}: sharded gradients are reduced every micro "
                                 "batch, which Megatron's pipeline schedules do not support (use zero=1)")
        # Megatron-FSDP runs on the distributed optimizer (DistributedOptimizer's FSDP paths).
        # Megatron-FSDP saves only in its own format (validate_args).
        out += ["--use-distributed-optimizer", "--use-megatron-fsdp",
                f"--data-parallel-sharding-strategy={FSDP_STRATEGY[zero]}", "--ckpt-format=fsdp_dtensor"]
    elif zero == 1:
        out.append("--use-distributed-optimizer")
    if lay.get("overlap_dp_comm", True):
        out.append("--overlap-grad-reduce")
        if zero >= 1:
            out.append("--overlap-param-gather")   # Megatron allows it only with the distributed optimizer
    if lay.get("offload_optimizer"):
        # megatron-core's default fraction is 0.0: say "all of it" as the plan does.
        # The hybrid CPU/GPU optimizer reuses the precision-aware optimizer's code path (validate_args).
        out += ["--optimizer-cpu-offload", "--optimizer-offload-fraction=1.0", "--use-precision-aware-optimizer"]


def _moe(plan: JobPlan, res: MegatronArgs, refuse) -> None:
    lay = plan.layout
    if lay.get("ep", 1) > 1:
        # Megatron's default dispatcher is allgather; the planner models all-to-all or DeepEP.
        if lay.get("moe_dispatcher", "alltoall") == "deepep":
            res.args += ["--moe-token-dispatcher-type=flex", "--moe-flex-dispatcher-backend=deepep"]
        else:
            res.args.append("--moe-token-dispatcher-type=alltoall")
        if lay.get("moe_fp8_dispatch"):
            res.warnings.append(f"{plan.source}: best.layout.moe_fp8_dispatch: Megatron-LM has no switch for FP8 "
                                "token dispatch; tokens travel in BF16, twice the all-to-all traffic planned")
    if lay.get("moe_overlap", "none") != "dualpipe":
        return
    if lay.get("framework") == "deepseek" and lay["pp"] > 1 and lay.get("interleave", 1) == 1:
        raise refuse("framework", "deepseek plans DeepSeek's DualPipe schedule (pp > 1, no virtual stages), which "
                                  "Megatron-LM does not run; plan with --framework megatron for a job it can write")
    # megatron-core TransformerConfig: EP all-to-all overlap needs ep > 1, the alltoall (or flex)
    # dispatcher, no full recompute, and virtual stages when pp > 1.
    if lay.get("ep", 1) == 1:
        raise refuse("moe_overlap", "dualpipe needs expert parallelism (ep > 1)")
    if lay.get("recompute") == "full":
        raise refuse("moe_overlap", "Megatron-Core's expert all-to-all overlap does not run with full recompute")
    if lay["pp"] > 1 and lay.get("interleave", 1) == 1:
        raise refuse("moe_overlap", "Megatron-Core's expert all-to-all overlap needs interleave > 1 when pp > 1")
    res.args.append("--overlap-moe-expert-parallel-comm")
    res.warnings.append(f"{plan.source}: best.layout.moe_overlap: Megatron-Core has no DualPipe schedule; "
                        "--overlap-moe-expert-parallel-comm hides the expert all-to-all behind another micro batch")
