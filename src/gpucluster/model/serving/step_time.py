"""Prefill and decode step time of one serving replica (TP x PP GPUs), term by term (seconds).

Prefill (the prompt's forward pass) is compute-bound: every linear GEMM of a layer
(transformer.layer_gemms, m = batch x prompt tokens) runs at the chip's measured GEMM
curve for the math precision (training.compute.gemm_curve: t = hypot(flops / rate,
bytes / HBM) + t0, fitted per chip and precision), causal flash attention at the chip's
measured attention TFLOP/s, element-wise kernels at achievable HBM bandwidth.

A decode step (one new token for each of `batch` sequences) is bound by reading the
weights and the KV cache from HBM (Pope et al. 2022, "Efficiently Scaling Transformer
Inference", section 3; Kwon et al. 2023, vLLM): the same per-GEMM smooth roofline with m =
batch, where the bytes term is this GPU's weights (weights / tp, at the weights'
precision: int4 halves fp8's bytes) and the flops term takes over at large batch;
attention reads each sequence's KV cache (batch x context x KV bytes per token per
GPU) at achievable HBM bandwidth.

Both add, per layer, 2 tensor-parallel all-reduces of tokens x hidden x 2 bytes (after
attention and after the MLP, Shoeybi et al. 2019, Megatron-LM section 3) and a fixed cost per
small kernel: KERNEL_S = 1.5 us for each of the ~6 non-GEMM kernels of a layer under CUDA graphs
(an estimate). Without CUDA graphs the CPU launches every kernel of a decode step at the
engine's launch cost; launches are asynchronous, so the step pays only what they take beyond
the device's own time (max(device, launches)).

The engine (catalog/data/engines.yaml, kernels.py) decides which measured kernels stand in:
on chips that aiconfigurator-core's database covers (serving_kernels.yaml), the GEMMs run at
that engine's measured small-m floor, weight-read bandwidth and large-m rate for the math
precision (FP8 GEMMs at decode shapes reach far less of HBM than BF16 ones), decode attention
at its measured KV-read rate, and the all-reduce at its measured custom (or NCCL) all-reduce
latency and bandwidth; elsewhere the chip's microbenchmarks (training.compute) and the
collective model over the replica's placement stand in. Each step adds the engine's host work
(scheduling, input preparation, sampling). No fitted factor divides either phase.

Pipeline parallelism splits the batch into pp micro-batches that flow through the stages:
a decode step takes pp x stage_time(batch / pp) plus the activations' hops, a prefill
(m + pp - 1) x stage_time(batch / m) with m = min(batch, pp) micro-batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from gpucluster.catalog.models import Gpu
from gpucluster.model.serving import fitted
from gpucluster.model.serving.kernels import KERNEL_S, Kernels, host_step_s, kernels_of
from gpucluster.model.serving.kv_cache import Quant, kv_bytes_per_token, kv_heads_per_gpu
from gpucluster.model.training.compute import GemmCurve
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.transformer_flops import layer_gemms
from gpucluster.model.transformer_params import stage_layer_counts
from gpucluster.specs.workload import TransformerSpec, filled

ACT_BYTES = 2            # activations on the wire and between kernels: bf16/fp16
EW_KERNELS = 6           # non-GEMM kernels per layer
TERMS = ("gemm", "attention", "elementwise", "tp_comm", "pp_comm", "overhead")


@dataclass(frozen=True)
class Replica:
    """One model replica: a model on tp x pp GPUs of a fabric, at given precisions."""
    spec: TransformerSpec
    fabric: TrainingFabric
    tp: int = 1
    pp: int = 1
    quant: Quant = field(default_factory=Quant)
    engine: str | None = None    # a name in catalog/data/engines.yaml; None: the registry's default
    ep: int = 1                  # expert parallelism inside the TP group: experts split over ep ranks

    def __post_init__(self) -> None:
        if self.ep < 1 or self.tp % self.ep or (self.ep > 1 and (not self.spec.is_moe or self.spec.experts % self.ep)):
            raise ValueError(f"expert parallelism {self.ep} must divide tp ({self.tp}) and the experts "
                             f"({self.spec.experts if self.spec.is_moe else 'a dense model has none'})")

    @property
    def kernels(self) -> Kernels:
        return kernels_of(self)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def gpu(self) -> Gpu:
        return self.fabric.gpu


@dataclass
class StepTime:
    terms: dict[str, float]                 # seconds, summing to total
    flops_s: float = 0.0                    # GEMM time if only the flops term counted
    bytes_s: float = 0.0                    # GEMM + attention time if only HBM traffic counted
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    @property
    def bound(self) -> str:
        """What limits this step: compute, HBM bandwidth, interconnect or fixed overhead."""
        comm = self.terms["tp_comm"] + self.terms["pp_comm"]
        work = {"compute": self.flops_s, "HBM bandwidth": self.bytes_s, "interconnect": comm,
                "kernel and host overhead": self.terms["overhead"]}
        return max(work, key=lambda k: work[k])


def _gemm_s(curve: GemmCurve, m: float, n: float, k: float, w_bytes: float, a_bytes: float,
            count: float = 1.0, grouped: bool = False) -> tuple[float, float, float]:
    """(time, flops-only time, bytes-only time) of `count` GEMMs (m x k) @ (k x n) whose
    weights are k x n at `w_bytes` per element: the smooth roofline of compute.GemmCurve.
    `grouped`: one grouped-GEMM kernel for all of them (MoE experts), one fixed cost t0."""
    t_f = 2.0 * m * n * k / (curve.peak_tflops * 1e12 * curve.eff_max)
    t_b = (k * n * w_bytes + m * k * a_bytes + m * n * ACT_BYTES) / (curve.hbm_gbps * 1e9)
    t0 = curve.t0_s if grouped else count * curve.t0_s
    return count * math.hypot(t_f, t_b) + t0, count * t_f, count * t_b


def _experts_touched(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts that `tokens` tokens route to (uniform routing)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def ep_imbalance(ep: int, assignments):
    """The busiest of `ep` expert-parallel ranks over the mean: `assignments` (tokens x top-k)
    routed uniformly are Binomial(N, 1/ep) per rank, whose expected maximum is about
    N/ep + sqrt(2 ln(ep) N/ep (1 - 1/ep)) (the Gaussian maximum). A step waits for that rank.
    Scalars or numpy arrays alike; 1 without EP."""
    if ep <= 1:
        return 1.0 + 0.0 * assignments
    r = 1.0 + (2.0 * math.log(ep) * (ep - 1) / (assignments + (assignments <= 0))) ** 0.5
    return (r + ep - abs(r - ep)) / 2   # at most ep: every assignment on one rank


def _layer_mix(spec: TransformerSpec, layers: int) -> list[tuple[bool, float]]:
    """(is MoE layer, how many) for a stage of `layers` layers, in the model's proportion."""
    if not spec.is_moe:
        return [(False, float(layers))]
    moe = layers * spec.moe_layers / spec.layers
    return [(False, layers - moe), (True, moe)]


def attention_work(spec: TransformerSpec, tokens, tp: int, batch, context, new_tokens, kv_layer_gpu: float):
    """One layer's attention on one GPU: FLOPs (each new token's query against the keys before it,
    on average context + (new + 1) / 2) and KV-cache bytes read. Scalars or numpy arrays alike
    (the step-time tables evaluate it over batch sizes at once)."""
    keys = context + (new_tokens + 1) / 2
    if spec.attention == "mla":
        width = 2 * int(spec.kv_lora_rank) + int(spec.qk_rope_head_dim)  # type: ignore[arg-type]
    else:
        width = spec.qk_head_dim + spec.v_dim
    return 2 * tokens * spec.heads / tp * keys * width, batch * (context + new_tokens) * kv_layer_gpu


def _elementwise_bytes(spec: TransformerSpec, tokens: float, tp: int, moe: bool) -> float:
    """Bytes the non-GEMM kernels of one layer move: two norms (read + write h), two residual
    adds (read 2h, write h), rotary embedding on the local Q and K, the activation function
    (read 2 f/tp when gated, write f/tp)."""
    h = spec.hidden
    f = filled(spec.moe_ffn_hidden) * (spec.experts_per_token + spec.shared_experts) if moe \
        else filled(spec.ffn_hidden)
    qk = (spec.heads + int(spec.kv_heads or 1)) * spec.qk_head_dim / tp
    act = (3 if spec.gated_mlp else 2) * f / tp
    return tokens * ACT_BYTES * (2 * 2 * h + 2 * 3 * h + 2 * qk + act)


@lru_cache(maxsize=65536)
def _stage(rep: Replica, batch: float, new_tokens: int, context: float, layers: int, last: bool) -> StepTime:
    """One pipeline stage's forward over `batch` sequences, each adding `new_tokens` tokens
    on top of `context` cached ones (prefill: context 0; decode: new_tokens 1)."""
    spec, tp, kn = rep.spec, rep.tp, rep.kernels
    curve, half, xcurve = kn.gemm, kn.half, kn.expert
    wb, ab, xwb, xab = kn.weight_bytes, kn.act_bytes, kn.expert_weight_bytes, kn.expert_act_bytes
    hbm = kn.hbm_gbps * 1e9
    decode = context > 0
    att_t0, att_bw, att_rate = kn.decode_attention if decode else kn.prefill_attention
    tokens = batch * new_tokens
    kv_layer = kv_bytes_per_token(spec, rep.quant.kv) / spec.layers  # whole model, one layer
    kv_layer_gpu = kv_layer * (kv_heads_per_gpu(spec, tp) / (1 if spec.attention == "mla" else filled(spec.kv_heads)))
    terms = dict.fromkeys(TERMS, 0.0)
    flops_s = bytes_s = 0.0
    b_int = max(1, math.ceil(batch))
    launch = 0.0
    for moe, n in _layer_mix(spec, layers):
        if n <= 0:
            continue
        g_t = a_t = ew_t = 0.0
        kernels = EW_KERNELS + 1
        for g in layer_gemms(spec, b_int, tp, seq_len=new_tokens, dense_layer=not moe, causal=True,
                             ep=rep.ep, etp=tp // rep.ep):
            if g.kind == "attention":
                continue
            m, count, grouped, c, w, a = g.m * batch / b_int, float(g.count), False, curve, wb, ab
            if g.name.startswith("expert_"):
                # this GPU's experts (E / ep) that the step's tokens touch, and the assignments of
                # the busiest EP rank
                assigned = tokens * spec.experts_per_token
                touched = _experts_touched(spec.experts, spec.experts_per_token, tokens) / rep.ep
                m = assigned / rep.ep * ep_imbalance(rep.ep, assigned) / touched
                count, grouped, c, w, a = touched, True, xcurve, xwb, xab
            t, tf, tb = _gemm_s(c, m, g.n, g.k, w, a, count, grouped)
            g_t, flops_s, bytes_s = g_t + t, flops_s + n * tf, bytes_s + n * tb
            kernels += 1 if grouped else g.count
            if a < ACT_BYTES:  # the input is cast to 8 bits first: read 2 bytes, write 1
                ew_t += m * g.k * count * (ACT_BYTES + a) / hbm
        # Attention: causal flash attention over the prompt (prefill), or each new token's
        # query against the whole cache (decode): FLOPs at the measured attention rate, KV
        # bytes read at the measured (decode) or achievable (prefill) HBM bandwidth.
        a_flops, a_bytes = attention_work(spec, tokens, tp, batch, context, new_tokens, kv_layer_gpu)
        a_t = math.hypot(a_flops / att_rate, a_bytes / att_bw) + att_t0
        bytes_s += n * a_bytes / att_bw
        ew_t += _elementwise_bytes(spec, tokens, tp, moe) / hbm
        terms["gemm"] += n * g_t
        terms["attention"] += n * a_t
        terms["elementwise"] += n * ew_t
        terms["overhead"] += n * (fitted.DECODE_LAYER_S if decode else EW_KERNELS * KERNEL_S)
        launch += n * kernels * kn.launch_s if decode else 0.0
        terms["tp_comm"] += n * 2 * kn.allreduce_s(tokens * spec.hidden * ACT_BYTES)
    # Without CUDA graphs the CPU launches every kernel, asynchronously: the GPU waits only where
    # launching falls behind executing (short kernels), so the step pays what the launches take
    # beyond the device's own time.
    terms["overhead"] += max(0.0, launch - sum(terms.values()))
    if last:
        # Output layer for each sequence's last position only, in 16 bits, then the
        # vocab-parallel logits gathered for sampling.
        t, tf, tb = _gemm_s(half, batch, spec.vocab / tp, spec.hidden, 2.0, ACT_BYTES)
        terms["gemm"] += t
        flops_s, bytes_s = flops_s + tf, bytes_s + tb
        terms["tp_comm"] += rep.fabric.time_s("all_gather", batch * spec.vocab * ACT_BYTES, tp, 1)
    return StepTime(terms, flops_s, bytes_s)


def _scaled(st: StepTime, k: float) -> StepTime:
    return StepTime({n: v * k for n, v in st.terms.items()}, st.flops_s * k, st.bytes_s * k)


def efficiency(rep: Replica) -> tuple[float, str]:
    """No fitted factor divides the step time any more (kept for the plan documents' field):
    1, and which engine's kernels the model stands on."""
    return 1.0, rep.kernels.provenance


def _finish(rep: Replica, st: StepTime, prefill: bool) -> StepTime:
    """The device time, then the engine's host work per step (and a prefill's fixed cost)."""
    out = _scaled(st, 1.0)
    out.terms["overhead"] += host_step_s(rep.kernels) + (fitted.PREFILL_FIXED_S if prefill else 0.0)
    return out


def _hop_s(rep: Replica, size_bytes: float) -> float:
    """One pipeline hop (send/recv to the next stage, tp ranks apart) on the fabric. Where the
    collective model has no finite answer for the placement, the NIC's GB/s per GPU (or the
    scale-up link's) and 10 us of latency stand in."""
    try:
        t = rep.fabric.send_recv_s(size_bytes, rep.tp)
    except ZeroDivisionError:  # a link of 0 GB/s
        t = math.inf
    if math.isfinite(t):
        return t
    f = rep.fabric
    gbps = f.nic_gbps_per_gpu or f.gpu.scale_up.bandwidth_gbps_per_direction.value
    return size_bytes / (gbps * 1e9) + 1e-5


def prefill_time(rep: Replica, batch: int, input_tokens: int) -> StepTime:
    """Forward pass over `batch` prompts of `input_tokens` tokens; it also yields each
    sequence's first output token. With pp > 1: m = min(batch, pp) micro-batches take
    m + pp - 1 stage slots, and each hop carries a micro-batch's activations."""
    layers = max(stage_layer_counts(rep.spec.layers, rep.pp))
    if rep.pp == 1:
        st = _scaled(_stage(rep, batch, input_tokens, 0.0, layers, True), 1.0)
    else:
        micro = min(batch, rep.pp)
        mb = batch / micro
        mid = _stage(rep, mb, input_tokens, 0.0, layers, False)
        last = _stage(rep, mb, input_tokens, 0.0, layers, True)
        slots = micro + rep.pp - 1
        st = StepTime({k: v * (slots - 1) + last.terms[k] for k, v in mid.terms.items()},
                      mid.flops_s * (slots - 1) + last.flops_s, mid.bytes_s * (slots - 1) + last.bytes_s)
        st.terms["pp_comm"] += (rep.pp - 1) * _hop_s(rep, mb * input_tokens * rep.spec.hidden * ACT_BYTES)
    return _finish(rep, st, True)


def decode_step_time(rep: Replica, batch: float, context: float) -> StepTime:
    """One decode step: one new token for each of `batch` sequences holding `context` tokens
    on average. With pp > 1 the batch is split into pp micro-batches that keep every stage
    busy: a token step is pp stage slots (each at batch / pp) and pp activation hops."""
    layers = max(stage_layer_counts(rep.spec.layers, rep.pp))
    micro = rep.pp if batch >= rep.pp else 1
    st = _scaled(_stage(rep, batch / micro, 1, context, layers, True), rep.pp)
    if rep.pp > 1:
        st.terms["pp_comm"] += rep.pp * _hop_s(rep, batch / micro * rep.spec.hidden * ACT_BYTES)
    return _finish(rep, st, False)
