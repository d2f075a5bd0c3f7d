"""Training stacks: what each one fuses, how it overlaps communication, how it shards.

A training run is the model, the layout and the stack that runs them. Two stacks running
the same layout differ in ways that cost time: whether the element-wise kernels are
fused (Transformer Engine / apex fused norms and bias-activation, or eager PyTorch ops),
how much host time each op costs, whether data-parallel communication overlaps the
backward by default, how gradients are bucketed, and how fully-sharded data parallelism
gathers parameters (one flat parameter per wrapped unit, or DeepSpeed's per-parameter
fetch with its own buckets). `Layout.framework` names one of `FRAMEWORKS`; every
default below is documented with its source. A setting a case or a plan states (the
attention kernel, DP overlap, ZeRO prefetch) overrides the framework's default.

Validation cases and plans that do not name a framework use `DEFAULT_FRAMEWORK`
(Megatron-LM / Megatron-Core), the stack most published runs used and the one the
kernel model (kernels.py) was written for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ShardStyle = Literal["per_unit", "per_parameter", "none"]


@dataclass(frozen=True)
class Framework:
    name: str
    title: str
    fused_elementwise: bool      # norms, bias+activation, bias+dropout+residual are fused kernels
    host_scale: float            # host seconds per op relative to kernels.HOST_S_PER_KERNEL (Megatron = 1)
    torch_compile: bool          # torch.compile on by default (fuses element-wise chains like the fused kernels)
    attention: str               # fused attention kernel it runs by default (model/training/attention.py names;
                                 # "default": the chip generation's, where the stack picks by version and chip)
    overlap_dp_comm: bool        # ZeRO-0/1/2 gradient reduction overlaps the backward by default
    dp_bucket_params: float      # gradient bucket (parameters) of the DP reduction; 0: the framework's rule below
    dp_grad_bytes: int           # bytes per gradient element on the wire of the DP reduction
    zero3: ShardStyle            # how zero=3 runs: FSDP per wrapped unit, DeepSpeed per parameter, or refused
    max_zero: int                # highest ZeRO stage the framework runs
    supports_pp: bool            # pipeline parallelism available
    supports_tp: bool
    moe_dispatcher: str          # default token dispatcher (model/training/moe.py)
    moe_overlap: str             # default EP overlap
    grad_accum_fused: bool       # the weight-gradient GEMM accumulates into the fp32 gradient buffer itself
    checkpoint: str              # how it checkpoints and steps the optimizer (documentation; not timed per step)
    source: str
    megatron_core: bool = False  # built on Megatron-Core: its schedules and its rules (expert all-to-all overlap)
    dualpipe: bool = False       # runs DeepSeek's DualPipe schedule (moe_overlap dualpipe without virtual stages)
    supports_cp: bool = True     # context parallelism (Megatron-Core's ring, torchtitan's, DeepSpeed-Ulysses)

    def summary(self) -> str:
        fused = "fused element-wise kernels" if self.fused_elementwise or self.torch_compile else "eager element-wise ops"
        z3 = {"per_unit": "FSDP-style sharding per wrapped unit", "per_parameter": "ZeRO-3 per-parameter fetch",
              "none": "no ZeRO-3"}[self.zero3]
        return f"{self.name} ({self.title}): {fused}, default attention {self.attention}, {z3}"


MEGATRON_BUCKET = 0.0  # Megatron-Core DDP: max(40M, 1M x dp) parameters per bucket (distributed_data_parallel_config.py)

FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework(
        "megatron", "Megatron-LM / Megatron-Core", fused_elementwise=True, host_scale=1.0, torch_compile=False,
        attention="default", overlap_dp_comm=False, dp_bucket_params=MEGATRON_BUCKET, dp_grad_bytes=2,
        zero3="per_unit", max_zero=3, supports_pp=True, supports_tp=True, moe_dispatcher="alltoall",
        moe_overlap="none", grad_accum_fused=True,
        checkpoint="distributed optimizer (ZeRO-1) with torch_dist checkpoints; optimizer step fused Adam",
        source="Megatron-LM arguments.py (--overlap-grad-reduce off by default; Transformer Engine "
               "DotProductAttention, which picks FlashAttention or cuDNN fused attention by TE version and "
               "chip: `default`, the chip generation's kernel of model/training/attention.py; cuDNN on "
               "Hopper came out 28% too fast on Llama 3 405B at 128K, FlashAttention-2 8%); Megatron-Core "
               "DistributedDataParallelConfig.bucket_size docstring (max(40M, 1M x dp) parameters); "
               "Megatron-Core custom FSDP shards per transformer layer; gradient accumulation fused into the "
               "weight-gradient GEMM (--gradient-accumulation-fusion, on unless --no-gradient-accumulation-fusion: "
               "fused_weight_gradient_mlp_cuda writes into the fp32 main_grad)", megatron_core=True),
    Framework(
        "nemo", "NVIDIA NeMo 2 (Megatron-Core underneath)", fused_elementwise=True, host_scale=1.0,
        torch_compile=False, attention="default", overlap_dp_comm=True, dp_bucket_params=MEGATRON_BUCKET,
        dp_grad_bytes=2, zero3="per_unit", max_zero=3, supports_pp=True, supports_tp=True,
        moe_dispatcher="alltoall", moe_overlap="none", grad_accum_fused=True,
        checkpoint="Megatron-Core distributed checkpoints, asynchronous save; distributed fused Adam",
        source="NeMo 2 llm recipes: MegatronStrategy DistributedDataParallelConfig(overlap_grad_reduce=True, "
               "overlap_param_gather=True); Megatron-Core kernels and buckets as megatron", megatron_core=True),
    Framework(
        "deepspeed", "Megatron-DeepSpeed / DeepSpeed ZeRO", fused_elementwise=True, host_scale=1.0,
        torch_compile=False, attention="flash2", overlap_dp_comm=False, dp_bucket_params=5e8, dp_grad_bytes=2,
        zero3="per_parameter", max_zero=3, supports_pp=True, supports_tp=True, moe_dispatcher="alltoall",
        moe_overlap="none", grad_accum_fused=False,
        checkpoint="per-rank optimizer shards (zero_pp_rank_*_optim_states.pt); fused Adam",
        source="DeepSpeed runtime/zero/config.py: overlap_comm false for stages 1-2, reduce_bucket_size 5e8, "
               "stage3_prefetch_bucket_size and per-parameter fetch in partitioned_param_coordinator.py; "
               "Megatron-DeepSpeed keeps Megatron's fused layer kernels (--use-flash-attn for FlashAttention-2); "
               "gradients accumulate in a separate fp32 pass per micro batch (bf16_optimizer.py "
               "fp32_groups_gradients; the fp16 engine adds into .grad)"),
    Framework(
        "fsdp", "PyTorch FSDP / FSDP2 trainers (fms-fsdp, lit-gpt, metaseq, HF accelerate)",
        fused_elementwise=False, host_scale=1.0, torch_compile=False, attention="flash2", overlap_dp_comm=True,
        dp_bucket_params=25e6 / 2, dp_grad_bytes=2, zero3="per_unit", max_zero=3, supports_pp=False,
        supports_tp=True, moe_dispatcher="alltoall", moe_overlap="none", grad_accum_fused=False,
        checkpoint="sharded state dict (torch.distributed.checkpoint); torch AdamW (foreach)",
        source="PyTorch FSDP docs: FlatParameter per wrapped module (transformer_auto_wrap_policy: one per block), "
               "BackwardPrefetch.BACKWARD_PRE default, limit_all_gathers (one unit ahead), reduce-scatter per "
               "unit; HYBRID_SHARD shards inside a group and all-reduces across groups; DDP bucket_cap_mb=25; "
               "SDPA's flash backend is FlashAttention-2; model code in eager PyTorch (RMSNorm as pow/mean/"
               "rsqrt/mul ops); DDP accumulates each micro batch's gradient into .grad in its own kernel; no "
               "context parallelism in these trainers (torchtitan has it)", supports_cp=False),
    Framework(
        "torchtitan", "torchtitan (FSDP2, DTensor TP, torch.compile optional)", fused_elementwise=False,
        host_scale=1.0, torch_compile=False, attention="flash2", overlap_dp_comm=True, dp_bucket_params=25e6 / 2,
        dp_grad_bytes=2, zero3="per_unit", max_zero=3, supports_pp=True, supports_tp=True,
        moe_dispatcher="alltoall", moe_overlap="none", grad_accum_fused=False,
        checkpoint="torch.distributed.checkpoint (DCP), async optional; fused AdamW",
        source="torchtitan docs/fsdp.md: fully_shard per TransformerBlock, one all-gather per block into a "
               "flat buffer, reshard_after_forward; train configs: compile off unless [compile] is enabled; "
               "SDPA (FlashAttention-2 backend); gradients accumulate in .grad, a kernel of their own"),
    Framework(
        "nanotron", "Hugging Face nanotron", fused_elementwise=True, host_scale=1.0, torch_compile=False,
        attention="flash2", overlap_dp_comm=True, dp_bucket_params=25e6 / 4, dp_grad_bytes=4, zero3="none",
        max_zero=1, supports_pp=True, supports_tp=True, moe_dispatcher="alltoall", moe_overlap="none",
        grad_accum_fused=False,
        checkpoint="per-rank safetensors shards; ZeRO-1 optimizer (optim/zero.py)",
        source="nanotron: DistributedDataParallel with ddp_bucket_cap_mb 25 and fp32 gradient accumulation "
               "(gradients reduced in fp32), ZeRO-1 only (optim/zero.py), flash-attn and its fused "
               "RMSNorm/rotary kernels, 1F1B pipeline; no context parallelism", supports_cp=False),
    Framework(
        "deepseek", "DeepSeek's in-house stack (HAI-LLM) as the DeepSeek-V3 report describes it",
        fused_elementwise=True, host_scale=1.0, torch_compile=False, attention="default", overlap_dp_comm=True,
        dp_bucket_params=MEGATRON_BUCKET, dp_grad_bytes=2, zero3="none", max_zero=1, supports_pp=True,
        supports_tp=True, moe_dispatcher="deepep", moe_overlap="dualpipe", grad_accum_fused=True,
        checkpoint="not published; ZeRO-1 optimizer states (report section 3.2)",
        source="DeepSeek-V3 technical report (arXiv 2412.19437) sections 3.2.1-3.2.3: DualPipe (bidirectional "
               "1F1B without virtual stages; forward and backward chunks of two micro batches overlap the expert "
               "all-to-all), node-limited dispatch over InfiniBand then NVLink (DeepEP's kernels), ZeRO-1 data "
               "parallelism, no tensor parallelism in V3's run (the stack is not public: its kernels are taken "
               "as Megatron-Core's fused ones)", dualpipe=True),
)}

DEFAULT_FRAMEWORK = "megatron"
# Other names the same stacks go by (a case or plan may use either): each maps to the entry whose
# kernels, overlap and sharding it runs. lit-gpt, metaseq/fairscale, HF accelerate and MosaicML's
# llm-foundry shard with FSDP; Megatron-DeepSpeed is the deepspeed entry; HAI-LLM is DeepSeek's.
ALIASES = {"megatron-lm": "megatron", "megatron-core": "megatron", "mcore": "megatron", "nemo2": "nemo",
           "megatron-deepspeed": "deepspeed", "fsdp1": "fsdp", "fsdp2": "fsdp", "pytorch-fsdp": "fsdp",
           "fairscale": "fsdp", "metaseq": "fsdp", "lit-gpt": "fsdp", "litgpt": "fsdp", "accelerate": "fsdp",
           "llm-foundry": "fsdp", "hai-llm": "deepseek"}


def canonical(name: str) -> str:
    """The registry name of a framework or one of its ALIASES (ValueError naming the valid ones)."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r}; valid: {', '.join(FRAMEWORKS)} "
                         f"(or {', '.join(ALIASES)})")
    return key


def get(name: str) -> Framework:
    """The framework called `name` or one of its aliases (an unknown name is an error naming the valid ones)."""
    return FRAMEWORKS[canonical(name)]


def fused(fw: Framework, torch_compile: bool | None = None, fused_kernels: bool | None = None) -> bool:
    """Whether the element-wise chains run as fused kernels: the stack's own fused kernels (the
    framework's default, or as the run states it: lit-gpt with flash-attn's fused RMSNorm and rotary,
    Liger kernels, apex), or torch.compile (likewise)."""
    own = fw.fused_elementwise if fused_kernels is None else fused_kernels
    return own or (fw.torch_compile if torch_compile is None else torch_compile)


def dp_bucket_params(fw: Framework, dp: int, overlap: bool = True) -> float:
    """Parameters per gradient bucket of the data-parallel reduction."""
    if fw.dp_bucket_params:
        return fw.dp_bucket_params
    if not overlap:
        # Megatron-Core DDP without --overlap-grad-reduce keeps one bucket (bucket_size None), as
        # Megatron-LM's contiguous gradient buffer did: one collective after the backward.
        return float("inf")
    return max(40e6, 1e6 * dp)  # Megatron-Core: larger DP groups get larger buckets (latency)


def problems(fw: Framework, zero: int, tp: int, pp: int, cp: int = 1) -> list[str]:
    """Layouts the framework cannot run, each naming its rule."""
    out = []
    if zero > fw.max_zero:
        out.append(f"framework {fw.name} runs ZeRO stages up to {fw.max_zero}, not zero={zero}")
    if pp > 1 and not fw.supports_pp:
        out.append(f"framework {fw.name} has no pipeline parallelism (pp={pp}); torchtitan or megatron do")
    if tp > 1 and not fw.supports_tp:
        out.append(f"framework {fw.name} has no tensor parallelism (tp={tp})")
    if cp > 1 and not fw.supports_cp:
        out.append(f"framework {fw.name} has no context parallelism (cp={cp}); torchtitan or megatron do")
    return out
