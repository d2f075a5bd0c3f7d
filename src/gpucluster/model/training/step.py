"""Step time of one training layout, term by term (seconds), on one cluster.

The step of a pipeline-parallel job (Narayanan et al. 2021):

    step = (m + (p - 1) / v) x t_mb  +  exposed DP/ZeRO communication  +  optimizer

where m = micro batches per step, p = pipeline stages, v = interleaved chunks,
and t_mb = forward + backward of one micro batch on the slowest stage. The
bubble is the (p - 1)/v extra slots (1F1B and interleaved 1F1B). t_mb adds, per
layer: GEMMs (compute.py: measured per chip and precision), fused attention,
memory-bound element-wise kernels, and the exposed collectives of TP/SP
(all-reduce, or all-gather + reduce-scatter with sequence parallelism), CP
(ring attention: K/V exchange, hidden behind attention compute where it can be)
and EP (two all-to-alls per MoE layer each way). Backward costs twice the
forward's compute; full recompute re-runs the forward, selective recompute the
attention core. Collectives come from the collective model on the groups' real
placement (fabric.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from gpucluster.model.training import frameworks
from gpucluster.model.training.compute import elementwise_time_s, gemm_curve
from gpucluster.model.training.kernels import (FLASH_BACKWARD_FACTOR, OUTPUT_KERNELS, host_bound, input_kernels,
                                               layer_kernels)
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.layout import Layout, Recompute
from gpucluster.model.training.moe import dispatch_combine_s, expert_imbalance
from gpucluster.model.training.memory import Memory, _moe_mix, memory
from gpucluster.model.transformer_flops import hardware_flops_per_iteration, logit_gemm, model_flops_per_iteration
from gpucluster.model.transformer_memory import weight_grad_optimizer_bytes
from gpucluster.model.transformer_params import params, stage_layer_counts
from gpucluster.specs.workload import TransformerSpec, filled

ACT_BYTES = 2           # bf16/fp16 activations on the wire (also with FP8 GEMMs)
GRAD_BYTES = 2          # gradients reduced in bf16/fp16
ADAM_BYTES_PER_PARAM = 30  # read fp32 master, m, v (12) + grad (2-4); write master, m, v, bf16 weight (14)

TERMS = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_bubble", "pp_p2p", "dp_comm", "optimizer")


@dataclass
class Estimate:
    layout: Layout
    gpus: int
    step_s: float
    terms: dict[str, float]          # seconds per step, summing to step_s
    memory: Memory
    model_flops: float               # per step, Megatron's count (no recompute)
    hardware_flops: float            # per step, including recompute
    tokens_per_step: int
    peak_tflops: float               # per GPU at the layout's precision
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_s / self.gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops / self.step_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.model_tflops_per_gpu / self.peak_tflops

    @property
    def hfu(self) -> float:
        return self.hardware_tflops_per_gpu / self.peak_tflops

    @property
    def dominant(self) -> str:
        return max(self.terms, key=lambda k: self.terms[k])


@dataclass(frozen=True)
class _LayerTimes:
    forward: float   # forward compute of one layer, one micro batch
    backward: float  # backward compute
    core: float      # the attention core's forward (selective recompute re-runs it)
    tp: float        # forward TP/SP collectives, the part the host's floor does not already cover
    tp_backward: float  # the same in the backward pass
    cp: float        # forward exposed CP exchange
    cp_backward: float  # backward exposed CP exchange (K/V again, and their gradients back)
    ep: float        # forward all-to-alls


def _layer(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, seq_len: int, dense: bool | None) -> _LayerTimes:
    """One layer's forward on one GPU; only the fields below matter, so the search shares it."""
    key = (lay.tp, lay.cp, lay.ep, lay.etp, lay.micro_batch, lay.overlap_tp_comm, lay.sequence_parallel,
           lay.precision, lay.flash_attention, lay.moe_dispatcher, lay.moe_fp8_dispatch, lay.moe_imbalance,
           lay.attention_kernel, lay.framework, lay.torch_compile, lay.fused_kernels)
    return _layer_cached(spec, key, fab, seq_len, dense)


@lru_cache(maxsize=4096)
def _layer_cached(spec: TransformerSpec, key: tuple, fab: TrainingFabric, seq_len: int,
                  dense: bool | None) -> _LayerTimes:
    (tp, cp, ep, etp, micro_batch, overlap_tp_comm, sequence_parallel, precision, flash_attention, moe_dispatcher,
     moe_fp8_dispatch, moe_imbalance, attention_kernel, framework, torch_compile, fused_kernels) = key
    lay = Layout(tp=tp, cp=cp, ep=ep, etp=etp, micro_batch=micro_batch, overlap_tp_comm=overlap_tp_comm,
                 sequence_parallel=sequence_parallel, precision=precision, flash_attention=flash_attention,
                 moe_dispatcher=moe_dispatcher, moe_fp8_dispatch=moe_fp8_dispatch, moe_imbalance=moe_imbalance,
                 attention_kernel=attention_kernel, framework=framework, torch_compile=torch_compile,
                 fused_kernels=fused_kernels)
    k = layer_kernels(spec, fab.gpu_name, lay.precision, lay.micro_batch, lay.tp, lay.cp, lay.sequence_parallel,
                      lay.ep, seq_len, dense, lay.flash_attention, expert_imbalance(lay), lay.expert_tp,
                      kernel=lay.attention_kernel, framework=lay.framework, torch_compile=lay.torch_compile,
                      fused_kernels=lay.fused_kernels)
    tokens = lay.micro_batch * seq_len / lay.cp
    act = tokens * spec.hidden * ACT_BYTES
    tp = 0.0
    if lay.tp > 1:
        if lay.sequence_parallel:
            tp = 2 * (fab.time_s("all_gather", act, lay.tp, 1) + fab.time_s("reduce_scatter", act, lay.tp, 1))
        else:
            tp = 2 * fab.time_s("all_reduce", act, lay.tp, 1)
    cp = cp_b = 0.0
    if lay.cp > 1:
        kv_width = (spec.kv_lora_rank or 0) if spec.attention == "mla" else filled(spec.kv_heads) * filled(spec.head_dim)
        kv = 2 * tokens * kv_width / lay.tp * ACT_BYTES
        ring = (lay.cp - 1) * fab.send_recv_s(kv, lay.tp)
        # Ring attention overlaps each K/V hop with one block of attention; the backward sends
        # K/V forward and their gradients back (twice the bytes) beside 2.5x the block's work.
        cp = max(0.0, ring - k.core_forward_s)
        cp_b = max(0.0, 2 * ring - FLASH_BACKWARD_FACTOR * k.core_forward_s)
    ep = 0.0
    if spec.is_moe and dense is not True and lay.ep > 1:
        ep = dispatch_combine_s(spec, lay, fab, tokens)
    # TP collectives run in line with the layer's kernels: where the host sets the pace they fill
    # the GPU's idle time, so only what they add to the pass is exposed.
    tp_f = k.forward(tp) - k.forward() if lay.overlap_tp_comm is False else tp
    tp_b = k.backward(tp) - k.backward() if lay.overlap_tp_comm is False else tp
    return _LayerTimes(k.forward(), k.backward(), k.core(), tp_f, tp_b, cp, cp_b, ep)


def estimate(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, *, seq_len: int | None = None,
             mem: Memory | None = None) -> Estimate:
    """Step time, memory and throughput of `lay` for `spec` on `fab` (layout assumed valid);
    `mem`: its memory, where the caller has it already (the layout search)."""
    s = seq_len or spec.seq_len
    gpu = fab.gpu
    mix = _moe_mix(spec)
    per_layer = {dense: _layer(spec, lay, fab, s, dense) for dense, _ in mix}
    counts = stage_layer_counts(spec.layers, lay.pp, lay.pp_embedding_layer, lay.pp_loss_layer, lay.stage_layers)
    frac = {dense: n / spec.layers for dense, n in mix}

    if len(per_layer) == 1:
        # One kind of layer (a dense model): the average below, the same sum (0 + t x 1.0), unrolled.
        ((d, t),) = per_layer.items()
        f = frac[d]
        compute_f, bwd, core, tp_f, cp_f, ep_f = (0 + t.forward * f, 0 + t.backward * f, 0 + t.core * f,
                                                  0 + t.tp * f, 0 + t.cp * f, 0 + t.ep * f)
        cp_b, tp_b = 0 + t.cp_backward * f, 0 + t.tp_backward * f
    else:
        def avg(attr: str) -> float:
            return sum(getattr(per_layer[d], attr) * frac[d] for d in per_layer)

        compute_f, bwd, core, tp_f, cp_f, ep_f = (avg(a) for a in ("forward", "backward", "core", "tp", "cp", "ep"))
        cp_b, tp_b = avg("cp_backward"), avg("tp_backward")
    # The backward runs the same collectives again (their transposes).
    extra = {"none": 0.0, "selective": core, "full": compute_f}[lay.recompute]
    layer_compute = compute_f + bwd + extra
    passes = 3 if lay.recompute == "full" else 2  # full recompute re-runs the forward's collectives
    layer_tp, layer_cp, layer_ep = (passes - 1) * tp_f + tp_b, (passes - 1) * cp_f + cp_b, passes * ep_f
    if lay.overlap_tp_comm:
        # Transformer Engine's userbuffers split each TP GEMM and run its all-gather or
        # reduce-scatter chunk by chunk beside it: only what outlasts the GEMMs is exposed.
        layer_tp = max(0.0, layer_tp - layer_compute)
    if lay.moe_overlap == "dualpipe":
        # DualPipe (DeepSeek-V3 report, section 3.2.1) runs one micro batch's all-to-all
        # beside another's compute.
        layer_ep = max(0.0, layer_ep - layer_compute)

    # The last stage also runs the output layer and the loss (vocab-parallel cross entropy);
    # Megatron keeps the output layer in bf16/fp16 under FP8.
    lg = logit_gemm(spec, lay.micro_batch, lay.tp, lay.cp, s)
    out_prec = "fp16" if lay.precision == "fp16" else "bf16"
    logits_t = 3 * gemm_curve(fab.gpu_name, out_prec).time_s(lg.m, lg.n, lg.k)
    logits_t += 3 * elementwise_time_s(fab.gpu_name, lg.m * lg.n * 4 * 2)
    # Both ends are kernels the host issues too; the first stage's embedding is memory-bound and
    # small next to a layer on the GPU, but not on the host of a small model.
    host_scale = frameworks.get(lay.framework).host_scale
    out_n, in_n = OUTPUT_KERNELS, input_kernels(spec)
    unit = max(layer_compute, 1e-12)
    if lay.pp == 1:
        stage_layers = counts[0] + host_bound(logits_t, out_n + in_n, host_scale) / unit
    else:
        stage_layers = max(counts[0] + host_bound(0.0, in_n, host_scale) / unit,
                           counts[-1] + host_bound(logits_t, out_n, host_scale) / unit)
    stage_layers = max(stage_layers, max(counts))
    per_mb = {"compute": stage_layers * layer_compute, "tp_comm": stage_layers * layer_tp,
              "cp_comm": stage_layers * layer_cp, "ep_comm": stage_layers * layer_ep}
    t_mb = sum(per_mb.values())
    m, p, v = lay.microbatches, lay.pp, lay.interleave
    terms = {k: m * val for k, val in per_mb.items()}
    t_f_stage = stage_layers * (compute_f + tp_f + cp_f + ep_f)
    t_b_stage = t_mb - t_f_stage
    if lay.dualpipe_schedule:
        # DualPipe's bubble (DeepSeek-V3 report, Table 2): (pp/2 - 1) x (F&B + B - 3W), with F&B
        # a forward and a backward chunk run as one overlapped pair (their compute: F + B) and W
        # the weight-gradient half of the backward (B/2: one of its two GEMMs per forward GEMM).
        f_and_b, b, w = t_f_stage + t_b_stage, t_b_stage, t_b_stage / 2
        terms["pp_bubble"] = (p / 2 - 1) * (f_and_b + b - 3 * w)
    else:
        terms["pp_bubble"] = (p - 1) / v * t_mb
    p2p_bytes = lay.micro_batch * s / lay.cp * spec.hidden * ACT_BYTES / lay.tp  # scatter-gather over TP ranks
    # Megatron overlaps p2p with compute in the steady state; warm-up and cool-down wait for it.
    terms["pp_p2p"] = 2 * (p - 1) * fab.send_recv_s(p2p_bytes, lay.tp * lay.cp * lay.dp) if p > 1 else 0.0

    # Parameters this GPU holds before ZeRO sharding (what data parallelism reduces, Adam updates).
    local = weight_grad_optimizer_bytes(spec, lay.tp, lay.pp, lay.dp, lay.ep, 0, lay.precision, cp=lay.cp,
                                        etp=lay.expert_tp)["params"]
    terms["dp_comm"] = _dp_exposed(spec, lay, fab, t_f_stage, t_b_stage, stage_layers, compute_f, layer_compute,
                                   local)
    terms["compute"] += _grad_accumulation_s(lay, fab, local)
    terms["optimizer"] = _optimizer_s(lay, fab, local)

    if mem is None:
        mem = memory(spec, lay, gpu.hbm_bytes, s)
    tokens = lay.global_batch * s
    return Estimate(lay, lay.gpus, sum(terms.values()), terms, mem, *_flops(spec, lay.global_batch, s, lay.recompute),
                    tokens, gpu.peak_tflops[lay.precision].value)


@lru_cache(maxsize=1024)
def _flops(spec: TransformerSpec, global_batch: int, seq_len: int, recompute: Recompute) -> tuple[float, float]:
    """(model, hardware) FLOPs of one step: the same for every layout of a search but its recompute."""
    return (model_flops_per_iteration(spec, global_batch, seq_len),
            hardware_flops_per_iteration(spec, global_batch, recompute, seq_len))


def _dp_exposed(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, t_f: float, t_b: float,
                stage_layers: float, compute_f: float, layer_compute: float, local: float) -> float:
    """Data-parallel gradient reduction and ZeRO parameter gathers that compute cannot hide
    (`local`: the parameters this GPU holds before ZeRO sharding). Gradients are reduced in
    the framework's buckets (frameworks.dp_bucket_params), each its own collective: at
    hundreds of GPUs a small bucket pays the ring's latency many times over. With overlap the
    buckets run beside the last micro batch's backward, but the last bucket waits for it."""
    n, stride = lay.dp * lay.cp, lay.tp
    if n <= 1:
        return 0.0
    fw = frameworks.get(lay.framework)
    if lay.zero >= 3:
        if fw.zero3 == "per_parameter":
            return _zero3_exposed(spec, lay, fab, n, stride, stage_layers, compute_f, layer_compute)
        return _fsdp_exposed(spec, lay, fab, n, stride, stage_layers, compute_f, layer_compute)
    bucket = frameworks.dp_bucket_params(fw, n, lay.overlap_dp_comm)
    if not lay.overlap_dp_comm:
        t_b = t_f = 0.0  # gradients reduced (and weights gathered) after the backward, not during it
    if lay.zero == 0:
        ar, last = _bucketed(fab, "all_reduce", local, bucket, fw.dp_grad_bytes, n, stride)
        return max(last, ar - t_b)
    # Distributed optimizer: reduce-scatter gradients (hidden behind the last backward),
    # all-gather updated weights (hidden behind the next step's first forward).
    rs, last_rs = _bucketed(fab, "reduce_scatter", local, bucket, fw.dp_grad_bytes, n, stride)
    ag, last_ag = _bucketed(fab, "all_gather", local, bucket, GRAD_BYTES, n, stride)
    return max(last_rs, rs - t_b) + max(last_ag, ag - t_f)


def _bucketed(fab: TrainingFabric, op: str, params_: float, bucket: float, nbytes: int, n: int,
              stride: int) -> tuple[float, float]:
    """(all buckets, the last one) of `op` over `params_` parameters in buckets of `bucket`."""
    full = int(params_ // bucket) if bucket < params_ else 0
    rest = params_ - full * bucket if full else params_
    one = fab.time_s(op, bucket * nbytes, n, stride) if full else 0.0
    tail = fab.time_s(op, rest * nbytes, n, stride) if rest > 0 else 0.0
    return full * one + tail, tail or one


def _unit_params(spec: TransformerSpec, ep: int) -> tuple[float, float]:
    """(parameters of one transformer block that a GPU of an `ep`-way expert group holds before
    sharding, averaged over dense and MoE blocks; parameters outside the blocks: embedding,
    output layer, final norm)."""
    p = params(spec)
    moe = p.mlp_moe - spec.experts * p.expert * (1 - 1 / ep) if p.moe_layers else 0.0
    blocks = float(spec.layers * p.attention + p.dense_layers * p.mlp_dense) + p.moe_layers * moe
    return blocks / spec.layers, p.embedding + p.final_norm + p.logits


def _fsdp_exposed(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, n: int, stride: int,
                  stage_layers: float, compute_f: float, layer_compute: float) -> float:
    """Fully-sharded data parallelism as PyTorch FSDP/FSDP2, torchtitan and Megatron-Core's FSDP
    run it: each wrapped unit (a transformer block) is ONE flat parameter, all-gathered before
    its forward and again before its backward (reshard after forward), its gradient
    reduce-scattered after its backward; the next unit's gather is prefetched while this one
    computes (FSDP BACKWARD_PRE, limit_all_gathers: one unit ahead). A unit's collectives are
    exposed only where they outlast its compute; the first gather of a pass and the last
    reduction wait. A full recompute runs inside the unit's backward, on the gathered weights.

    HSDP (`shard_group` g < n): gathers and reduce-scatters stay inside a group of g GPUs and
    each unit's gradient shard is then all-reduced across the n / g replicas."""
    per_layer, outside = _unit_params(spec, lay.ep)
    unit = per_layer / lay.tp * GRAD_BYTES
    root = outside / lay.tp * GRAD_BYTES
    g = lay.shard_group if 0 < lay.shard_group < n else n
    reps = n // g

    def comm(nbytes: float) -> tuple[float, float]:
        ag = fab.time_s("all_gather", nbytes, g, stride)
        red = fab.time_s("reduce_scatter", nbytes, g, stride)
        if reps > 1:
            red += fab.time_s("all_reduce", nbytes / g, reps, stride * g)
        return ag, red

    ag, red = comm(unit)
    ag_root, red_root = comm(root)
    compute_b = layer_compute - compute_f
    if lay.overlap_dp_comm:
        per_unit = max(0.0, ag - compute_f) + max(0.0, ag + red - compute_b)
    else:
        per_unit = 2 * ag + red
    edges = ag_root + red_root + ag + red  # the first unit's gather and the last reduction wait
    return lay.microbatches * (stage_layers * per_unit + edges)


PARAM_TENSORS_PER_LAYER = 12  # QKV, output, fc1, fc2 weights and biases; two norms' weights and biases


def weight_tensors(spec: TransformerSpec, ep: int = 1) -> list[float]:
    """Parameters of each large weight matrix of one (MoE if any) layer that a GPU of an `ep`-way
    expert group holds: what ZeRO-3 gathers one by one."""
    h, a = spec.hidden, spec.heads
    if spec.attention == "mla":
        out = [a * spec.v_dim * h]  # the output projection; MLA's low-rank projections are small
    else:
        d, g = spec.qk_head_dim, int(spec.kv_heads)  # type: ignore[arg-type]
        out = [h * (a * d + 2 * g * d), a * d * h]
    gate = 2 if spec.gated_mlp else 1
    if spec.is_moe:
        fe = int(spec.moe_ffn_hidden)  # type: ignore[arg-type]
        out += [gate * h * fe, h * fe] * (spec.experts // ep + spec.shared_experts)
    else:
        f = int(spec.ffn_hidden)  # type: ignore[arg-type]
        out += [gate * h * f, h * f]
    return [float(t) for t in out if t > 0]


def _zero3_exposed(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, n: int, stride: int,
                   stage_layers: float, compute_f: float, layer_compute: float) -> float:
    """ZeRO-3 / FSDP as it runs: every micro batch all-gathers each layer's weights before its
    forward (again before a full recompute's forward) and before its backward, and
    reduce-scatters its gradients after it. Each parameter tensor is its own collective
    (DeepSpeed ZeRO-3 and FSDP2 shard per parameter), so a flat ring over n GPUs pays its
    n - 1 hops of latency per tensor. Prefetching overlaps the gathers with compute, but a
    runtime prefetches through a window of `zero3_prefetch_params` parameters (DeepSpeed's
    stage3_prefetch_bucket_size, default 5e8; FSDP prefetches a whole layer: no limit): a
    weight larger than the window is gathered when its module runs, on the critical path
    (GPT-3 175B's 604M-parameter MLP matrices; none of Llama 70B's), and its gradient, larger
    than the reduce bucket of the same default size, is reduced as soon as it is produced.
    What the rest cannot hide behind compute is exposed too (all of it when overlap_dp_comm is
    off)."""
    layer_bytes = params(spec).total / spec.layers / lay.tp * GRAD_BYTES
    tensors = [t / lay.tp for t in weight_tensors(spec, lay.ep)]
    big = sum(t for t in tensors if t > lay.zero3_prefetch_params) / max(sum(tensors), 1.0)
    k = max(PARAM_TENSORS_PER_LAYER, len(tensors))
    ag = k * fab.time_s("all_gather", layer_bytes / k, n, stride)
    rs = k * fab.time_s("reduce_scatter", layer_bytes / k, n, stride)
    gathers_fwd = 2 if lay.recompute == "full" else 1
    comm_f, comm_b = gathers_fwd * ag, ag + rs
    compute_b = layer_compute - compute_f * gathers_fwd
    if lay.overlap_dp_comm:
        exposed = (big * comm_f + max(0.0, (1 - big) * comm_f - gathers_fwd * compute_f)
                   + big * comm_b + max(0.0, (1 - big) * comm_b - compute_b))
    else:
        exposed = comm_f + comm_b
    return lay.microbatches * stage_layers * exposed + ag  # the first layer's gather waits


GRAD_ACCUM_BYTES_PER_PARAM = 10  # read the micro batch's bf16/fp16 gradient (2), read and write the fp32 sum (8)


def _grad_accumulation_s(lay: Layout, fab: TrainingFabric, local: float) -> float:
    """Gradient accumulation a stack runs as kernels of its own: after each micro batch but the
    first, this GPU's gradients are added into the fp32 accumulation buffer (PyTorch DDP's .grad,
    DeepSpeed's fp32 gradient groups, nanotron's fp32 buffers), a memory-bound pass over every
    parameter it holds. Megatron-Core fuses it into the weight-gradient GEMM
    (frameworks.Framework.grad_accum_fused). ZeRO-3 keeps only a shard of each gradient, and
    ZeRO-2 reduces them as they come: neither keeps a full local buffer to add into."""
    if lay.microbatches <= 1 or lay.zero >= 2 or frameworks.get(lay.framework).grad_accum_fused:
        return 0.0
    return (lay.microbatches - 1) * elementwise_time_s(fab.gpu_name, local * GRAD_ACCUM_BYTES_PER_PARAM)


def _optimizer_s(lay: Layout, fab: TrainingFabric, local: float) -> float:
    """Adam is memory-bound: ~30 bytes moved per parameter of this GPU's shard (`local`: the
    parameters it holds before ZeRO sharding)."""
    shard = local / (lay.dp * lay.cp) if lay.zero >= 1 else local
    if lay.offload_optimizer:
        # Gradients down and weights up over PCIe (~50 GB/s per GPU on PCIe5 x16), Adam on the
        # host at ~25 GB/s of CPU memory bandwidth per GPU (a 400-500 GB/s socket shared by 8-16 GPUs).
        return shard * 2 * GRAD_BYTES / 50e9 + shard * ADAM_BYTES_PER_PARAM / 25e9
    return elementwise_time_s(fab.gpu_name, shard * ADAM_BYTES_PER_PARAM)
