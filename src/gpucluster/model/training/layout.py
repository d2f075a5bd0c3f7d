"""A parallel layout of one training job, and the rules that make it valid.

Megatron-LM's rank order is used throughout: tensor parallel fastest, then
context, then data (expert groups are carved out of data x context), then
pipeline (`--order tp-cp-ep-dp-pp`). A TP group is therefore contiguous GPUs,
a DP group strides over tp x cp GPUs, and pipeline neighbours are tp x cp x dp
apart.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

from gpucluster.model.training import frameworks
from gpucluster.model.transformer_params import layout_problems
from gpucluster.specs.workload import TransformerSpec

Recompute = Literal["none", "selective", "full"]
Precision = Literal["fp16", "bf16", "fp8"]
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")
PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "fp8")


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 0                 # expert tensor parallel size (Megatron --expert-tensor-parallel-size); 0: tp
    interleave: int = 1          # virtual pipeline stages per GPU (1 = plain 1F1B)
    micro_batch: int = 1         # sequences per micro batch
    global_batch: int = 1        # sequences per optimizer step
    sequence_parallel: bool = False
    recompute: Recompute = "none"
    zero: int = 0                # 0 | 1 | 2 | 3 (3 = FSDP full shard)
    precision: Precision = "bf16"
    offload_optimizer: bool = False
    flash_attention: bool = True  # fused attention (FlashAttention / cuDNN); False: scores in HBM (Megatron <= 2022)
    attention_kernel: str = "default"  # the fused kernel by generation (model/training/attention.py); "default": the stack's
    framework: str = "megatron"  # the training stack (model/training/frameworks.py): fusion, host cost, overlap defaults
    shard_group: int = 0         # HSDP: GPUs a ZeRO-3 shard group spans (replicated across groups); 0: all of dp x cp
    torch_compile: bool | None = None  # torch.compile fuses element-wise chains; None: the framework's default
    fused_kernels: bool | None = None  # fused norm/activation/rotary kernels (apex, flash-attn, Liger); None: the framework's
    overlap_dp_comm: bool = True  # gradient reduction / ZeRO gathers overlap compute (Megatron --overlap-grad-reduce)
    overlap_tp_comm: bool = False  # TP collectives overlap GEMMs (Transformer Engine userbuffers --tp-comm-overlap)
    moe_overlap: Literal["none", "dualpipe"] = "none"  # EP all-to-all hidden behind another micro batch
    zero3_prefetch_params: float = 5e8  # parameters ZeRO-3 gathers ahead (DeepSpeed stage3_prefetch_bucket_size)
    moe_dispatcher: Literal["alltoall", "deepep"] = "alltoall"  # see model/training/moe.py
    moe_fp8_dispatch: bool = False     # tokens sent to their experts in FP8 (DeepSeek-V3)
    # Busiest expert rank's tokens / mean (1: balanced routing); None: not stated, moe.DEFAULT_MOE_IMBALANCE.
    moe_imbalance: float | None = None
    pp_embedding_layer: bool = False  # the embedding counts as a pipeline layer (Megatron-Core)
    pp_loss_layer: bool = False       # the loss counts as a pipeline layer (Megatron-Core)
    # Explicit pipeline layout: transformer layers of each virtual stage in schedule order (pp x
    # interleave entries; virtual stage i runs on rank i % pp), as Megatron-Core's
    # --pipeline-model-parallel-layout or a per-stage layer list states it. Empty: an even split.
    stage_layers: tuple[int, ...] = ()

    @property
    def pipeline_layers(self) -> int:
        """Layers the pipeline split counts beyond the transformer's (embedding, loss)."""
        return int(self.pp_embedding_layer) + int(self.pp_loss_layer)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def dualpipe_schedule(self) -> bool:
        """DeepSeek's DualPipe pipeline schedule (DeepSeek-V3 report, section 3.2.1): `moe_overlap`
        dualpipe on a plain pipeline (pp > 1, no interleave) in a framework that runs it
        (frameworks.Framework.dualpipe). With interleave > 1 the same overlap is Megatron-Core's
        interleaved 1F1B with the expert all-to-all overlapped; with pp 1, two micro batches
        overlapped on one GPU."""
        fw = frameworks.FRAMEWORKS.get(self.framework)
        return self.moe_overlap == "dualpipe" and self.pp > 1 and self.interleave == 1 and fw is not None \
            and fw.dualpipe

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def microbatches(self) -> int:
        """Micro batches each data-parallel replica runs per step (gradient accumulation)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def with_(self, **changes) -> Layout:
        return replace(self, **changes)

    def short(self) -> str:
        parts = [f"tp={self.tp}", f"pp={self.pp}", f"dp={self.dp}"]
        parts += [f"cp={self.cp}"] if self.cp > 1 else []
        parts += [f"ep={self.ep}"] if self.ep > 1 else []
        parts += [f"etp={self.etp}"] if self.etp and self.etp != self.tp else []
        parts += [f"v={self.interleave}"] if self.interleave > 1 else []
        parts += [f"mb={self.micro_batch}", f"gbs={self.global_batch}"]
        parts += ["sp"] if self.sequence_parallel else []
        parts += [f"recompute={self.recompute}"] if self.recompute != "none" else []
        parts += [f"zero={self.zero}"] if self.zero else []
        parts += [self.precision]
        parts += ["offload"] if self.offload_optimizer else []
        parts += ["unfused-attention"] if not self.flash_attention else []
        parts += ["no-dp-overlap"] if not self.overlap_dp_comm else []
        parts += ["tp-overlap"] if self.overlap_tp_comm else []
        parts += [f"moe-overlap={self.moe_overlap}"] if self.moe_overlap != "none" else []
        parts += [f"moe-dispatcher={self.moe_dispatcher}"] if self.moe_dispatcher != "alltoall" else []
        parts += ["moe-fp8-dispatch"] if self.moe_fp8_dispatch else []
        parts += [f"moe-imbalance={self.moe_imbalance:g}"] if self.moe_imbalance is not None else []
        parts += [f"zero3-prefetch={self.zero3_prefetch_params:g}"] if self.zero >= 3 and \
            self.zero3_prefetch_params != 5e8 else []
        parts += [f"shard-group={self.shard_group}"] if self.zero >= 3 and self.shard_group else []
        parts += [f"attention={self.attention_kernel}"] if self.attention_kernel != "default" else []
        parts += [f"stages={'|'.join(map(str, self.stage_layers))}"] if self.stage_layers else []
        parts += [f"framework={self.framework}"] if self.framework != "megatron" else []
        parts += [f"compile={'on' if self.torch_compile else 'off'}"] if self.torch_compile is not None else []
        parts += [f"fused-kernels={'on' if self.fused_kernels else 'off'}"] if self.fused_kernels is not None else []
        return " ".join(parts)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def problems(spec: TransformerSpec, lay: Layout, gpus: int | None = None, seq_len: int | None = None) -> list[str]:
    """Why this layout cannot run (empty: it can). Memory is checked separately."""
    return shape_problems(spec, lay, gpus, seq_len) + option_problems(lay)


def shape_problems(spec: TransformerSpec, lay: Layout, gpus: int | None = None,
                   seq_len: int | None = None) -> list[str]:
    """`problems` but for the memory options (ZeRO stage, recompute): the layout search checks
    these once per shape and `option_problems` once per option."""
    out = layout_problems(spec, lay.tp, lay.pp, lay.cp, lay.ep, seq_len)
    for name in ("dp", "interleave", "micro_batch", "global_batch"):
        if getattr(lay, name) < 1:
            out.append(f"{name} must be >= 1, got {getattr(lay, name)}")
    if out:
        return out
    if gpus is not None and lay.gpus != gpus:
        out.append(f"tp x pp x dp x cp = {lay.tp} x {lay.pp} x {lay.dp} x {lay.cp} = {lay.gpus}, "
                   f"but the job has {gpus} GPUs")
    if lay.global_batch % (lay.micro_batch * lay.dp):
        out.append(f"global_batch ({lay.global_batch}) is not a multiple of micro_batch x dp "
                   f"({lay.micro_batch} x {lay.dp})")
    if lay.etp < 0 or (lay.etp and lay.tp % lay.etp):
        out.append(f"etp ({lay.etp}) must divide tp ({lay.tp})")
    elif (lay.tp * lay.dp * lay.cp) % (lay.ep * lay.expert_tp):
        out.append(f"ep x etp ({lay.ep} x {lay.expert_tp}) must divide tp x dp x cp ({lay.tp * lay.dp * lay.cp}): "
                   "expert groups are carved out of the same GPUs (Megatron-Core's MoE parallel folding)")
    if lay.stage_layers:
        out += stage_layers_problems(spec, lay)
    elif lay.interleave > 1:
        if lay.pp == 1:
            out.append("interleave > 1 needs pipeline parallelism (pp > 1)")
        elif (spec.layers + lay.pipeline_layers) % (lay.pp * lay.interleave):
            extra = f" + {lay.pipeline_layers} (embedding/loss)" if lay.pipeline_layers else ""
            hint = ("; Megatron-Core counts the embedding and the loss as layers when asked "
                    "(pp_embedding_layer, pp_loss_layer)") if (spec.layers + 2) % (lay.pp * lay.interleave) == 0 \
                and not lay.pipeline_layers else ""
            out.append(f"layers ({spec.layers}{extra}) is not a multiple of pp x interleave "
                       f"({lay.pp} x {lay.interleave}){hint}")
        elif lay.global_batch % (lay.micro_batch * lay.dp) == 0 and lay.microbatches < lay.pp:
            # Megatron-Core (0.9+) runs any number of micro batches >= pp; older releases
            # wanted a multiple of pp.
            out.append(f"the interleaved schedule needs at least pp ({lay.pp}) micro batches per step, "
                       f"got {lay.microbatches}")
    out += dualpipe_problems(lay)
    if not 1.0 <= lay.zero3_prefetch_params <= 1e15:
        out.append(f"zero3_prefetch_params must be between 1 and 1e15, got {lay.zero3_prefetch_params}")
    if lay.moe_imbalance is not None and not 1.0 <= lay.moe_imbalance <= 64:
        out.append(f"moe_imbalance must be between 1 and 64 (busiest expert rank / mean), got {lay.moe_imbalance}")
    if lay.sequence_parallel and lay.tp == 1:
        out.append("sequence_parallel needs tp > 1")
    if lay.shard_group < 0 or (lay.shard_group and (lay.dp * lay.cp) % lay.shard_group):
        out.append(f"shard_group ({lay.shard_group}) must divide dp x cp ({lay.dp * lay.cp}): HSDP shards inside "
                   "groups of that many GPUs and replicates across them")
    try:
        fw = frameworks.get(lay.framework)
    except ValueError as exc:
        out.append(str(exc))
    else:
        out += frameworks.problems(fw, 0, lay.tp, lay.pp, lay.cp)
    if lay.precision not in PRECISIONS:
        out.append(f"precision must be one of {', '.join(PRECISIONS)}, got {lay.precision!r}")
    return out


def dualpipe_problems(lay: Layout) -> list[str]:
    """The expert all-to-all overlap on a pipeline without virtual stages: Megatron-Core refuses it
    (TransformerConfig.__post_init__); DeepSeek's DualPipe runs it with its own rules
    (deepseek-ai/DualPipe, dualpipe.py `step`: an even number of pipeline ranks, and an even
    number of micro batches, at least twice the ranks: half enter at each end)."""
    fw = frameworks.FRAMEWORKS.get(lay.framework)
    if lay.moe_overlap == "dualpipe" and lay.pp > 1 and lay.interleave == 1 and fw is not None and fw.megatron_core:
        return [f"moe_overlap dualpipe: Megatron-Core ({fw.name}) overlaps the expert all-to-all only with virtual "
                "stages (interleave > 1) when pp > 1; DeepSeek's DualPipe runs without them (framework deepseek)"]
    if not lay.dualpipe_schedule:
        return []
    out = []
    if lay.pp % 2:
        out.append(f"DualPipe pairs pipeline rank i with rank pp - 1 - i: pp must be even, got {lay.pp}")
    if lay.global_batch % (lay.micro_batch * lay.dp) == 0 and (lay.microbatches < 2 * lay.pp
                                                                 or lay.microbatches % 2):
        out.append(f"DualPipe feeds half the micro batches from each end: it needs an even number of at least "
                   f"2 x pp ({2 * lay.pp}) per step, got {lay.microbatches}")
    return out


def stage_layers_problems(spec: TransformerSpec, lay: Layout) -> list[str]:
    """An explicit pipeline layout's problems (Megatron-Core checks the same)."""
    n = lay.pp * lay.interleave
    if len(lay.stage_layers) != n:
        return [f"the pipeline layout lists {len(lay.stage_layers)} stages, but pp x interleave is "
                f"{lay.pp} x {lay.interleave} = {n}"]
    if any(c < 0 for c in lay.stage_layers):
        return ["the pipeline layout has a stage with a negative layer count"]
    if sum(lay.stage_layers) != spec.layers:
        return [f"the pipeline layout places {sum(lay.stage_layers)} transformer layers, the model has "
                f"{spec.layers}"]
    return []


def option_problems(lay: Layout) -> list[str]:
    """The memory options' own problems (ZeRO stage, recompute)."""
    return options_problems(lay.zero, lay.pp, lay.recompute, lay.framework)


def options_problems(zero: int, pp: int, recompute: str, framework: str = "megatron") -> list[str]:
    """`option_problems` of a layout with this ZeRO stage, pipeline depth and recompute (the
    layout search checks its options before it makes a layout of them)."""
    out: list[str] = []
    if framework in frameworks.FRAMEWORKS and zero > frameworks.FRAMEWORKS[framework].max_zero:
        out.append(f"framework {framework} runs ZeRO stages up to {frameworks.FRAMEWORKS[framework].max_zero}, "
                   f"not zero={zero}")
    if zero not in (0, 1, 2, 3):
        out.append(f"zero must be 0, 1, 2 or 3, got {zero}")
    if zero == 2 and pp > 1:
        # ZeRO-3 with pipeline parallelism runs (FSDP2 + PP, as torchtitan does); ZeRO-2 does not.
        out.append("ZeRO-2 shards gradients every micro batch, which pipeline parallelism does not support "
                   "(DeepSpeed and Megatron allow ZeRO-1 with pp > 1; FSDP2 allows full sharding, zero=3)")
    if recompute not in RECOMPUTE:
        out.append(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return out
