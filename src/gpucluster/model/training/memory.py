"""Memory per GPU of one training layout (bytes), and whether it fits the GPU's HBM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.model.training import frameworks
from gpucluster.model.training.layout import Layout, Recompute
from gpucluster.model.transformer_memory import (activation_bytes_outside_layers, activation_bytes_per_layer,
                                                 pipeline_inflight_microbatches, weight_grad_optimizer_bytes)
from gpucluster.model.transformer_params import params, stage_layer_counts
from gpucluster.specs.workload import TransformerSpec

# CUDA context (~0.5 GiB), NCCL communicator buffers (~1 GiB with several groups) and the
# caching allocator's fragmentation: an estimate, the same for every chip.
RESERVED_BYTES = 3 * 2**30


@dataclass(frozen=True)
class Memory:
    weights: float
    grads: float
    optimizer: float
    activations: float
    buffers: float           # ZeRO-3 prefetched layers, reserved runtime memory
    capacity: float          # HBM of the GPU

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.buffers

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def rows(self) -> list[tuple[str, float]]:
        return [("weights", self.weights), ("gradients", self.grads), ("optimizer states", self.optimizer),
                ("activations", self.activations), ("buffers and runtime", self.buffers),
                ("total", self.total), ("HBM", self.capacity)]


def _moe_mix(spec: TransformerSpec) -> list[tuple[bool | None, int]]:
    """(dense_layer flag, layer count) pairs; one entry for dense models."""
    if not spec.is_moe:
        return [(None, spec.layers)]
    return [(True, spec.dense_layers), (False, spec.moe_layers)] if spec.dense_layers else [(False, spec.layers)]


def activation_per_layer(spec: TransformerSpec, lay: Layout, seq_len: int, recompute: Recompute) -> float:
    """Average activation bytes of one layer for one micro batch (dense and MoE layers mixed)."""
    total = 0.0
    for dense, count in _moe_mix(spec):
        total += count * activation_bytes_per_layer(spec, lay.micro_batch, lay.tp, lay.sequence_parallel,
                                                    recompute, lay.cp, seq_len=seq_len, dense_layer=dense,
                                                    flash_attention=lay.flash_attention)
    per_layer = total / spec.layers
    fw = frameworks.get(lay.framework)
    if recompute != "full" and not frameworks.fused(fw, lay.torch_compile, lay.fused_kernels):
        per_layer += eager_activation_bytes(spec, lay, seq_len)
    return per_layer


def eager_activation_bytes(spec: TransformerSpec, lay: Layout, seq_len: int) -> float:
    """What eager PyTorch keeps beyond the fused kernels' activations, per layer and micro batch:
    autograd saves the fp32 input and the fp32 normalized tensor of each RMSNorm written as ops
    (x.float(), pow, mean, rsqrt, mul: 8 bytes per element, two norms a layer) and the output of
    silu that the gate's multiply needs (2 bytes per FFN element); the fused kernels recompute
    them in their backward."""
    tokens = lay.micro_batch * seq_len / lay.cp
    norm_tokens = tokens / lay.tp if lay.sequence_parallel else tokens
    ffn = int(spec.moe_ffn_hidden if spec.is_moe else spec.ffn_hidden)  # type: ignore[arg-type]
    gated = ffn * (spec.experts_per_token if spec.is_moe else 1) if spec.gated_mlp else 0
    return 2 * 8 * norm_tokens * spec.hidden + 2 * tokens * gated / lay.tp


def memory(spec: TransformerSpec, lay: Layout, hbm_bytes: float, seq_len: int) -> Memory:
    return MemoryTerms(spec, lay, seq_len).memory(lay, hbm_bytes)


class MemoryTerms:
    """The memory of one layout, in parts: what does not depend on its ZeRO stage, recompute or
    optimizer offload is computed once, the rest once per value asked for. The layout search tries
    several of these options on each layout (plan/train_search.py); `memory()` is this with one.

    `shared`: a dict the search keeps for one model and sequence length, across its layouts: the
    activation terms depend on the micro batch, tp, sp, cp and attention kernel only, the weight
    terms not on the micro batch or interleave, so most layouts find them there."""

    def __init__(self, spec: TransformerSpec, lay: Layout, seq_len: int,
                 shared: dict[tuple, Any] | None = None) -> None:
        self.spec, self.base, self.seq_len = spec, lay, seq_len
        self._shared: dict[tuple, Any] = {} if shared is None else shared
        key = ("outside", lay.micro_batch, lay.tp, lay.sequence_parallel, lay.cp)
        outside = self._shared.get(key)
        if outside is None:
            outside = self._shared[key] = activation_bytes_outside_layers(spec, lay.micro_batch, lay.tp,
                                                                          lay.sequence_parallel, lay.cp,
                                                                          seq_len=seq_len)
        self.outside = outside
        self.counts = stage_layer_counts(spec.layers, lay.pp, lay.pp_embedding_layer, lay.pp_loss_layer, lay.stage_layers)
        mbs = lay.microbatches
        self.first = pipeline_inflight_microbatches(lay.pp, lay.interleave, 0, mbs)
        self.last_inflight = pipeline_inflight_microbatches(lay.pp, lay.interleave, lay.pp - 1, mbs)
        # DualPipe (DeepSeek-V3 report, Table 2): every rank holds two pipeline stages (i and
        # pp - 1 - i, one per direction), so twice the parameters and their states, and the
        # activations of pp + 1 micro batches.
        self.copies = 2 if lay.dualpipe_schedule else 1
        if lay.dualpipe_schedule:
            self.first = self.last_inflight = float(min(lay.pp + 1, mbs))
        # recompute -> activation bytes per layer; ZeRO stage -> weight terms: shared by the layouts
        # of the same micro batch, tp, sp, cp and attention (the same shape)
        self._act: dict[str, float] = self._shared.setdefault(
            ("activation", lay.micro_batch, lay.tp, lay.sequence_parallel, lay.cp, lay.flash_attention,
             lay.framework, lay.torch_compile, lay.fused_kernels), {})
        self._wgo: dict[int, dict[str, float]] = self._shared.setdefault(
            ("wgo", lay.tp, lay.pp, lay.dp, lay.ep, lay.precision, lay.cp, lay.expert_tp), {})

    def memory(self, lay: Layout, hbm_bytes: float) -> Memory:
        """Memory of `lay`: the layout these terms were made for, but for its zero, recompute
        and offload_optimizer."""
        return Memory(*self.parts(lay.zero, lay.recompute, lay.offload_optimizer), hbm_bytes)

    def parts(self, zero: int, recompute: Recompute, offload_optimizer: bool) -> tuple[float, float, float, float,
                                                                                        float]:
        """Memory's fields but the capacity (weights, grads, optimizer, activations, buffers) for
        these options: the search sums them to see whether a layout fits before it makes one."""
        spec, base = self.spec, self.base
        wgo = self._wgo.get(zero)
        if wgo is None:
            wgo = self._wgo[zero] = weight_grad_optimizer_bytes(spec, base.tp, base.pp, base.dp, base.ep, zero,
                                                               base.precision, cp=base.cp, etp=base.expert_tp)
        per_layer = self._act.get(recompute)
        if per_layer is None:
            per_layer = self._act[recompute] = activation_per_layer(spec, base, self.seq_len, recompute)
        outside, counts, first = self.outside, self.counts, self.first
        act_first = first * (counts[0] * per_layer + outside["first"])
        act_last = self.last_inflight * counts[-1] * per_layer + outside["last"]
        if base.pp == 1:
            act_first = act_last = first * counts[0] * per_layer + outside["first"] + outside["last"]
        buffers = float(RESERVED_BYTES)
        weights, grads, optimizer = (self.copies * wgo[k] for k in ("weights", "grads", "optimizer"))
        if zero >= 3:
            # FSDP keeps the gathered weights of the running unit and the prefetched next one,
            # and the unsharded gradient of the unit being reduced.
            buffers += 3 * params(spec).total / spec.layers / base.tp * 2
            n = base.dp * base.cp
            if 0 < base.shard_group < n:
                # HSDP: the states are sharded over the shard group only, replicated across groups.
                weights, grads, optimizer = (x * n / base.shard_group for x in (weights, grads, optimizer))
        optimizer = 0.0 if offload_optimizer else optimizer
        return weights, grads, optimizer, max(act_first, act_last), buffers
