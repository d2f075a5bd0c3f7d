"""The kernels of one transformer layer on one GPU, and their time: a closed-form kernel-level model.

A layer's forward is a fixed sequence of kernels (Megatron-LM's GPT layer, the one
Megatron-Core, NeMo and Megatron-DeepSpeed run):

    layernorm, QKV GEMM, [attention: one fused kernel | QK^T bmm, scale-mask-softmax,
    dropout, scores x V bmm, context permute], output GEMM, bias-dropout-add, layernorm,
    fc1 GEMM, bias-activation, fc2 GEMM, bias-dropout-add

Each kernel costs what the GPU needs for it (GEMMs: compute.GemmCurve, batched and with
wave quantization; memory-bound kernels: bytes / achievable HBM bandwidth). A pass over a
layer also cannot run faster than the host issues its kernels (eager PyTorch runs the
Python op, autograd bookkeeping and the CUDA launch for each: HOST_S_PER_KERNEL per
modelled kernel): a GPU whose kernels are shorter than that waits for the host. That floor
is what makes small models slow per FLOP (the vTrain runs: ~3 ms per layer and micro batch
whatever the width). The backward pass runs two GEMMs per forward GEMM (data and weight
gradients), FlashAttention's backward kernel (2.5x the forward's work: 5 matrix products
to 2, Dao 2023), and memory-bound kernels moving about twice the forward's bytes.

Bytes per memory-bound kernel count 2-byte (fp16/bf16) activations: a layernorm reads and
writes its input (4 B per element), bias + dropout + residual add reads two tensors and
writes one plus a 1-byte mask (7 B; 6 B for a model without dropout, TransformerSpec.dropout;
eager stacks: residual_bytes_kernels), bias + GeLU reads and writes (4 B; SwiGLU reads two
halves, 6 B), softmax reads and writes the scores (4 B), dropout on the probabilities reads
them, writes them and a mask (5 B; no kernel without dropout). With sequence parallelism the
norms and dropouts see 1/tp of the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog import catalog
from gpucluster.model.training import attention, compute, frameworks
from gpucluster.model.training.compute import GemmCurve, gemm_curve, hbm_gbps
from gpucluster.model.training.grouped_gemm import expert_gemm_s, permute_bytes
from gpucluster.model.training.power import clock_fraction
from gpucluster.model.transformer_flops import layer_gemms
from gpucluster.specs.workload import TransformerSpec, filled

HOST_S_PER_KERNEL = 50e-6       # host cost of one modelled kernel, fitted (benchmarks/cross_validate.py)
HOST_BLEND_POWER = 2.0          # GPU and host combine as (g^p + h^p)^(1/p): queueing smooths the max (fitted)
BACKWARD_MEMORY_FACTOR = 2.0    # backward memory-bound kernels move ~2x the forward's bytes
FLASH_BACKWARD_FACTOR = 2.5     # Dao 2023, FlashAttention-2 section 3.2: 5 products to 2
BACKWARD_KERNELS_PER_FORWARD = 2.0  # data and weight gradients per GEMM; a backward per element-wise op
# Eager PyTorch (a framework without fused element-wise kernels, frameworks.Framework.fused_elementwise,
# and without torch.compile): the Llama reference RMSNorm runs x.float(), pow(2), mean, rsqrt, mul,
# type_as and * weight, 7 kernels moving ~38 bytes per element where one fused kernel moves 4 (a
# LayerNorm is one native kernel, but its bias/dropout/residual chain is not fused either); SwiGLU
# runs silu and mul, 2 kernels and 10 bytes where the fused one moves 6; bias + dropout + residual
# add runs as separate ops (residual_bytes_kernels).
# Under FP8, the GEMMs Megatron-Core's Transformer Engine layer spec runs as LayerNorm*Linear
# (TELayerNormColumnParallelLinear: the QKV projection, MLA's q_up and kv_up, the dense MLP's fc1)
# get their input from the norm kernel already in FP8, with no cast kernel of their own; the
# others (attention output projection, fc2 after Megatron's own bias-SwiGLU kernel, the MLA
# down-projections, the experts' grouped GEMMs) cast their input separately.
NORM_FUSED_FP8 = frozenset({"qkv", "q_up", "kv_up", "mlp_fc1"})
EAGER_NORM = (38 / 4, 7)        # (bytes factor, kernels) of one norm
EAGER_ACTIVATION = (10 / 6, 2)  # of the MLP activation


def residual_bytes_kernels(spec: TransformerSpec, fused: bool) -> tuple[float, int]:
    """Bytes per element and kernels of the bias + dropout + residual add after attention and the
    MLP. Fused: one kernel reads the two tensors and writes the sum (6 B) plus a 1-byte mask with
    dropout. Eager: a bias add (read, write: 4 B), a dropout (read, write, mask: 5 B) and the
    residual add (6 B), each its own kernel, and only those the model has (spec.bias, spec.dropout)."""
    if fused:
        return 6.0 + (1 if spec.dropout else 0), 1
    return 6.0 + (4 if spec.bias else 0) + (5 if spec.dropout else 0), 1 + int(bool(spec.bias)) + int(bool(spec.dropout))


# Kernels the host issues per micro batch outside the transformer layers, counted in Megatron-LM's
# GPT model (an estimate from its code, not a measurement): the output side runs the final norm,
# the logits GEMM and _VocabParallelCrossEntropy (max, shift, the target-range masks, the gather
# of the target logits, exp, sum, log: ~17 ops) and the loss average, ~22 forward and ~12 backward
# (softmax minus the one-hot, the scale by the loss gradient, the GEMM's two gradients, the norm's);
# the input side the embedding lookup (plus position embedding and its add when learned, dropout
# when the model has it) and about two backward kernels per embedding table.
OUTPUT_KERNELS = 22 + 12


def input_kernels(spec: TransformerSpec) -> int:
    learned = spec.position_embedding == "learned"
    return 1 + 2 * int(learned) + int(bool(spec.dropout)) + 2 * (1 + int(learned))


def host_bound(gpu_s: float, kernels: float, host_scale: float = 1.0) -> float:
    """A pass of `kernels` kernels that keep the GPU busy `gpu_s` seconds, with the host issuing
    each at HOST_S_PER_KERNEL x host_scale (GPU and host combined as HOST_BLEND_POWER says)."""
    host = kernels * HOST_S_PER_KERNEL * host_scale
    p = HOST_BLEND_POWER
    return (gpu_s ** p + host ** p) ** (1 / p)


@dataclass(frozen=True)
class LayerKernels:
    """GPU seconds of one layer for one micro batch on one GPU (compute only, no communication)."""
    forward_s: float
    backward_s: float
    core_forward_s: float      # the attention core alone (what selective recompute re-runs)
    gemm_s: float              # forward GEMMs (for the breakdown)
    memory_s: float            # forward memory-bound kernels
    kernels: int               # forward kernels
    core_kernels: int          # forward kernels of the attention core
    host_scale: float = 1.0    # the framework's host cost per op relative to Megatron's (frameworks.py)

    def host_bound(self, gpu_s: float, kernels: float) -> float:
        """A pass of `kernels` kernels that keep the GPU busy `gpu_s` seconds."""
        return host_bound(gpu_s, kernels, self.host_scale)

    def forward(self, comm_s: float = 0.0) -> float:
        """The forward pass; `comm_s` of collectives on the same stream share the host's floor
        (a host-bound GPU runs them while it waits for the next kernel)."""
        return self.host_bound(self.forward_s + comm_s, self.kernels)

    def backward(self, comm_s: float = 0.0) -> float:
        return self.host_bound(self.backward_s + comm_s, BACKWARD_KERNELS_PER_FORWARD * self.kernels)

    def core(self) -> float:
        return self.host_bound(self.core_forward_s, self.core_kernels)


def layer_kernels(spec: TransformerSpec, gpu_name: str, precision: str, micro_batch: int, tp: int, cp: int,
                  sp: bool, ep: int, seq_len: int, dense: bool | None, flash: bool,
                  imbalance: float = 1.0, etp: int | None = None, *, kernel: str = "default",
                  framework: str = "megatron", torch_compile: bool | None = None,
                  fused_kernels: bool | None = None) -> LayerKernels:
    """`kernel`: the fused attention kernel (Layout.attention_kernel); `framework`: the stack
    (Layout.framework), whose fusion and host cost per op differ; `torch_compile`: stated, or
    None for the framework's default."""
    fw = frameworks.get(framework)
    fused = frameworks.fused(fw, torch_compile, fused_kernels)
    norm_f, norm_k = (1.0, 1) if fused else EAGER_NORM
    act_f, act_k = (1.0, 1) if fused else EAGER_ACTIVATION
    res_bytes, res_k = residual_bytes_kernels(spec, fused)
    curve = gemm_curve(gpu_name, precision)
    half = gemm_curve(gpu_name, "fp16" if precision == "fp16" else "bf16")
    bw = hbm_gbps(catalog.gpus.get(gpu_name)) * 1e9
    tokens = micro_batch * seq_len / cp
    norm_tokens = tokens / tp if sp else tokens
    h = spec.hidden
    t = {"gemm": 0.0, "memory": 0.0, "core": 0.0, "backward": 0.0}
    count = {"all": 0, "core": 0}

    def gemm(m: float, n: float, k: float, n_kernels: int) -> None:
        g = curve.time_s(m, n, k, n_kernels)
        t["gemm"] += g
        t["backward"] += 2 * g           # data gradient and weight gradient
        count["all"] += n_kernels

    def memory(nbytes: float, kernels: int = 1) -> None:
        t["memory"] += nbytes / bw
        t["backward"] += BACKWARD_MEMORY_FACTOR * nbytes / bw
        count["all"] += kernels

    memory(norm_f * 4 * norm_tokens * h, norm_k)                  # input layernorm
    for g in layer_gemms(spec, micro_batch, tp, cp, sp, ep, seq_len, dense_layer=dense, causal=flash, etp=etp):
        if g.kind == "attention":
            continue
        if precision == "fp8" and g.name not in NORM_FUSED_FP8:
            # Transformer Engine casts each GEMM input to FP8 (amax, scale, a transposed copy for
            # the backward): read 2 bytes, write 2 x 1 byte per input element, fused per GEMM.
            memory(4 * g.m * g.k * g.count)
        if g.name.startswith("expert_"):
            # One grouped kernel for the local experts (model/training/grouped_gemm.py); the busiest
            # expert rank (imbalance) sets the pace.
            f_s, b_s, n_k = expert_gemm_s(curve, g.m, g.n, g.k, int(g.count), imbalance)
            t["gemm"] += f_s
            t["backward"] += b_s
            count["all"] += n_k
            if g.name == "expert_fc1":   # token permutation into expert order and back (two kernels)
                memory(permute_bytes(g.m * imbalance * g.count, spec.experts_per_token, h))
                count["all"] += 1
        else:
            gemm(g.m, g.n, g.k, g.count)
        if g.name in ("qkv", "q_proj", "kv_up"):
            fwd, bwd, n = _attention(spec, micro_batch, tp, cp, seq_len, flash, half, gpu_name, bw, kernel,
                                       None if fw.attention == "default" else fw.attention)
            t["core"] += fwd
            t["backward"] += bwd
            count["all"] += n
            count["core"] += n
        elif g.name in ("mlp_fc1", "shared_fc1", "expert_fc1"):
            width = g.n * g.count / (2 if spec.gated_mlp else 1)
            memory(act_f * (6 if spec.gated_mlp else 4) * g.m * width, act_k)  # bias + activation (SwiGLU: 2 halves)
        elif g.name in ("attn_out", "mlp_fc2"):
            memory(res_bytes * norm_tokens * h, res_k)                # bias + dropout + residual add
            if g.name == "attn_out":
                memory(norm_f * 4 * norm_tokens * h, norm_k)         # post-attention layernorm
    if tp > 1:
        # The host issues the TP collectives too: an all-reduce after attention and after the
        # MLP (with sequence parallelism an all-gather before and a reduce-scatter after each).
        count["all"] += 4 if sp else 2
    forward = t["gemm"] + t["memory"] + t["core"]
    return LayerKernels(forward, t["backward"], t["core"], t["gemm"], t["memory"], count["all"], count["core"],
                        fw.host_scale)


def _attention(spec: TransformerSpec, micro_batch: int, tp: int, cp: int, seq_len: int, flash: bool,
               half: GemmCurve, gpu_name: str, bw: float, kernel: str = "default",
               framework_default: str | None = None) -> tuple[float, float, int]:
    """GPU seconds of the attention core's forward and backward (one fused kernel, or the unfused
    bmm / softmax / dropout / bmm chain), and its forward kernel count. `kernel`: a name of
    model/training/attention.py ("default": the chip generation's, or `framework_default`)."""
    heads = spec.heads // tp
    q = seq_len / cp
    if spec.attention == "mla":
        qk, v = spec.qk_head_dim, spec.v_dim
    else:
        qk = v = filled(spec.head_dim)
    window = spec.sliding_window
    name = "unfused" if not flash else attention.resolve_on(kernel, gpu_name, framework_default)
    if name != "unfused":
        # Causal: each query sees half the keys on average (masked blocks skipped); a sliding window fewer.
        keys = attention.keys_per_query(seq_len, True, window)
        flops = 2 * micro_batch * heads * q * keys * (qk + v)
        fwd, bwd = attention.attention_times_s(gpu_name, name, flops, seq_len, cp, (qk + v) / 2, True, window,
                                               sustained=compute.sustained(gpu_name, half.precision)[0] *
                                               clock_fraction(gpu_name)[0])
        # With context parallelism the ring runs one attention kernel per K/V block received.
        return fwd, bwd, cp
    keys = min(seq_len, window) if window else seq_len  # unfused windowed: a banded score matrix
    batch = micro_batch * heads
    scores = batch * q * keys
    bmm = half.batched_time_s(q, keys, qk, batch) + half.batched_time_s(q, v, keys, batch)
    softmax = 4 * scores / bw                                     # fused scale-mask-softmax
    dropout = 5 * scores / bw if spec.dropout else 0.0            # dropout + mask (none without dropout)
    permute = 4 * micro_batch * q * heads * v / bw                # context back to [s, b, h]
    return (bmm + softmax + dropout + permute, 2 * bmm + 1.5 * softmax + dropout + permute,
            5 if spec.dropout else 4)
