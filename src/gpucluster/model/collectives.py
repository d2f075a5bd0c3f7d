"""Collective communication model: time, algbw and busbw of NCCL-style collectives.

Conventions follow nccl-tests (doc/PERFORMANCE.md): `size` is the byte count the
benchmark prints (the full buffer for all_gather/reduce_scatter/all_to_all),
algbw = size / time, busbw = algbw * factor with factor 2(n-1)/n for all_reduce,
(n-1)/n for all_gather, reduce_scatter and all_to_all, and 1 for broadcast,
reduce and send/recv. Bus bytes w = size * factor are what each GPU's busiest
link carries, so the time of one algorithm on one link is

    t_bulk = base + steps * hop + w / (eff * B) * (1 + (half_bytes / c)^k)     (LL128/Simple)
    t_ll   = base + steps * hop_ll + w / (eff_ll * B)                          (LL)
    t      = min(t_bulk, t_ll)

(see catalog/data/links.yaml: B is the link's GB/s per direction, c the bytes of
one algorithm step (S/n for a ring: with many ranks the steps get small and
slow, which is how NCCL's channel count falls with the bytes per rank), eff,
half_bytes and k are fitted per link technology and algorithm by
benchmarks/collective_fit.py, and steps grow with the group: 2(n-1) for a ring
all-reduce). NCCL's tuner picks the protocol the same way: LL, whose steps are
cheap but which moves half its bytes as flags, for small messages; the bulk
protocols for large ones. Algorithms, chosen like NCCL's tuner by least time:

- ring: one ring through all GPUs; its bandwidth is that of the slowest link
  the ring crosses (a NIC as soon as the group spans scale-up domains).
- nvls: NVLink SHARP, all_reduce inside one NVSwitch domain (Hopper and later).
- hierarchical: reduce-scatter inside each domain, the collective across
  domains on every GPU's own rail (S/g bytes each), all-gather inside; NCCL
  pipelines the phases, so the bandwidth term is the slowest phase's and the
  latencies add (NCCL's tree and NVLS-tree algorithms).

Everything here is pure and works on numpy arrays of sizes as well as scalars. numpy loads on the
first array call: the scalar fast path (collective_scalar.py, what the training planner calls)
runs without it, so its commands start without importing numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpucluster.catalog.models import Link, Ramp

if TYPE_CHECKING:
    import numpy as np

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"]
OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
                        "send_recv")
Algorithm = Literal["auto", "ring", "nvls", "hierarchical"]
ALGORITHMS: tuple[str, ...] = ("auto", "ring", "nvls", "hierarchical")


@dataclass(frozen=True)
class Tier:
    """One level of the fabric as one GPU sees it."""
    link: Link
    gbps_per_direction: float  # GB/s per GPU per direction into this tier

    def ramp(self, in_switch: bool = False) -> Ramp:
        if in_switch:
            if self.link.in_switch is None:
                raise ValueError(f"{self.link.name} has no in-switch reduction")
            return self.link.in_switch
        return self.link.ring


@dataclass(frozen=True)
class CommGroup:
    """A group of GPUs placed on the fabric: `per_domain` of them in each scale-up domain."""
    gpus: int
    per_domain: int
    scale_up: Tier
    scale_out: Tier | None = None
    domain_size: int = 0          # GPUs in a full domain (0: same as per_domain)
    switched: bool = True         # NVSwitch (any-to-any) rather than a point-to-point mesh
    in_switch_reduction: bool = False
    oversubscription: float = 1.0  # applied to scale-out traffic

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.per_domain < 1:
            raise ValueError("a group needs at least one GPU")
        if self.gpus % self.per_domain:
            raise ValueError(f"{self.gpus} GPUs cannot be split evenly into domains of {self.per_domain}")
        if self.domains > 1 and self.scale_out is None:
            raise ValueError("the group spans several scale-up domains but the cluster has no scale-out network")
        if self.oversubscription < 1:
            raise ValueError("oversubscription must be >= 1")

    @property
    def domains(self) -> int:
        return self.gpus // self.per_domain

    @property
    def scale_up_gbps(self) -> float:
        """Per-GPU bandwidth to the other group members inside the domain.

        On a point-to-point mesh (MI300X) a GPU reaches each peer over one of its
        domain_size-1 links, so a sub-group uses only its share of them.
        """
        full = self.domain_size or self.per_domain
        if self.switched or full <= 1 or self.per_domain <= 1:
            return self.scale_up.gbps_per_direction
        return self.scale_up.gbps_per_direction * (self.per_domain - 1) / (full - 1)

    @property
    def scale_out_gbps(self) -> float:
        assert self.scale_out is not None
        return self.scale_out.gbps_per_direction / self.oversubscription


@dataclass(frozen=True)
class Prediction:
    """Result for one size; arrays when sizes were an array."""
    op: str
    size_bytes: np.ndarray | float
    time_s: np.ndarray | float
    algbw_gbps: np.ndarray | float
    busbw_gbps: np.ndarray | float
    algorithm: np.ndarray | str
    bottleneck: np.ndarray | str


def bus_factor(op: str, n: int) -> float:
    if n <= 1:
        return 0.0 if op != "send_recv" else 1.0
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")


def ring_steps(op: str, n: int) -> int:
    """Sequential communication steps of the ring (or pairwise) algorithm on n ranks."""
    if n <= 1:
        return 0
    if op == "all_reduce":
        return 2 * (n - 1)
    if op == "send_recv":
        return 1
    return n - 1


def transfer_time(w_bytes, chunk_bytes, gbps: float, ramp: Ramp):
    """Bandwidth term w / (eff B) * (1 + (half / chunk)^k); zero bytes take no time.

    w is what the busiest link carries; chunk is the message of one algorithm step
    (S/n for a ring), whose size decides how well NCCL fills its channels and pipeline.
    """
    import numpy as np

    w = np.asarray(w_bytes, dtype=float)
    c = np.broadcast_to(np.asarray(chunk_bytes, dtype=float), w.shape)
    bw = ramp.efficiency.value * gbps * 1e9
    safe_c = np.where(c > 0, c, 1.0)
    return np.where(w > 0, w / bw * (1 + (ramp.half_bytes.value / safe_c) ** ramp.ramp_exponent.value), 0.0)


def _latency_s(link: Link, steps: int) -> float:
    return (link.base_latency_us.value + steps * link.hop_latency_us.value) * 1e-6


def ll_latency_s(link: Link, steps: int) -> float:
    """Latency of `steps` algorithm steps under NCCL's LL protocol (the link must have one)."""
    assert link.low_latency is not None
    return (link.base_latency_us.value + steps * link.low_latency.hop_latency_us.value) * 1e-6


def ll_rate(link: Link, gbps: float) -> float:
    """Bytes per second LL moves over a link of `gbps` GB/s per direction."""
    assert link.low_latency is not None
    return link.low_latency.efficiency.value * gbps * 1e9


def _phase(link: Link, steps: int, w, chunk, gbps: float, ramp: Ramp):
    """One algorithm over one tier: the faster of the bulk protocols and LL, per size."""
    import numpy as np

    bulk = _latency_s(link, steps) + transfer_time(w, chunk, gbps, ramp)
    if link.low_latency is None:
        return bulk
    w = np.asarray(w, dtype=float)
    return np.minimum(bulk, ll_latency_s(link, steps) + np.where(w > 0, w / ll_rate(link, gbps), 0.0))


def ring_chunk(op: str, size, n: int):
    """Bytes one ring step moves: S/n, except for ops that forward the whole buffer."""
    import numpy as np

    s = np.asarray(size, dtype=float)
    return s if op in ("broadcast", "reduce", "send_recv") else s / max(n, 1)


def _ring(op: str, size, g: CommGroup):
    """Flat ring (pairwise for all_to_all) over every GPU of the group."""
    import numpy as np

    n = g.gpus
    s = np.asarray(size, dtype=float)
    w, chunk = s * bus_factor(op, n), ring_chunk(op, s, n)
    up = _phase(g.scale_up.link, ring_steps(op, n), w, chunk, g.scale_up_gbps, g.scale_up.ramp())
    if g.per_domain == 1:
        up = 0.0 * up  # one GPU per domain: every ring edge is a network hop
    if g.domains == 1:
        return up, "scale-up"
    out_tier = g.scale_out
    assert out_tier is not None
    if op == "all_to_all":
        # Only the share addressed to other domains crosses the NICs; both run at once.
        up = _phase(g.scale_up.link, g.per_domain - 1, s * (g.per_domain - 1) / n, chunk, g.scale_up_gbps,
                    g.scale_up.ramp())
        out = _phase(out_tier.link, g.domains - 1, s * (n - g.per_domain) / n, chunk, g.scale_out_gbps,
                     out_tier.ramp())
    else:
        # NCCL runs one ring per channel and spreads the channels' domain crossings over the
        # rails: each domain sends one ring edge per channel, so its p GPUs' NICs share w.
        out = _phase(out_tier.link, ring_steps(op, n), w / g.per_domain, chunk, g.scale_out_gbps, out_tier.ramp())
    return np.maximum(up, out), np.where(out >= up, "scale-out", "scale-up")


def _nvls(size, g: CommGroup):
    """NVLink SHARP all_reduce: each GPU writes S to the switch and reads S back,
    so its link carries S bytes each way whatever the group size."""
    import numpy as np

    s = np.asarray(size, dtype=float)
    return _latency_s(g.scale_up.link, 2) + transfer_time(s, s, g.scale_up_gbps, g.scale_up.ramp(in_switch=True))


def _hierarchical(op: str, size, g: CommGroup):
    """Inside each domain, then across domains on every GPU's own rail; pipelined."""
    import numpy as np

    s = np.asarray(size, dtype=float)
    out_tier = g.scale_out
    assert out_tier is not None
    d, p = g.domains, g.per_domain
    up_link = g.scale_up.link
    if op == "all_reduce":
        ring_w, ring_lat_steps = s * bus_factor("all_reduce", p), ring_steps("all_reduce", p)
        if g.in_switch_reduction and up_link.in_switch is not None:
            intra = transfer_time(s, s, g.scale_up_gbps, g.scale_up.ramp(True))
            intra_lat = _latency_s(up_link, 2)
        else:
            intra = transfer_time(ring_w, s / p, g.scale_up_gbps, g.scale_up.ramp())
            intra_lat = _latency_s(up_link, ring_lat_steps)
        # Across domains each rail carries S/p through a pipelined tree.
        inter_w, inter_chunk = s / p * bus_factor("all_reduce", d), s / p
    elif op in ("broadcast", "reduce"):
        ring_w, ring_lat_steps = s, ring_steps(op, p)
        intra = transfer_time(s, s, g.scale_up_gbps, g.scale_up.ramp())
        intra_lat = _latency_s(up_link, ring_lat_steps)
        inter_w, inter_chunk = s / p, s / p
    else:
        raise ValueError(f"no hierarchical algorithm for {op}")
    # Across domains NCCL runs double binary trees: about 2*log2(d) network steps.
    inter_steps = 2 * int(np.ceil(np.log2(d)))
    inter = transfer_time(inter_w, inter_chunk, g.scale_out_gbps, out_tier.ramp())
    # The network part starts once per collective (its proxies and the tree's pipeline fill: the
    # scale-out link's base latency), then pays each tree step.
    inter_lat = _latency_s(out_tier.link, inter_steps)
    # NCCL pipelines the phases chunk by chunk: the slower bandwidth term sets the pace,
    # and every phase's latency is paid once.
    total = np.maximum(intra, inter) + intra_lat + inter_lat
    if up_link.low_latency is not None and out_tier.link.low_latency is not None:
        # LL on both tiers (a ring inside the domain, the tree across): cheap steps, low rates.
        ll = (ll_latency_s(up_link, ring_lat_steps) + ll_latency_s(out_tier.link, inter_steps)
              + np.maximum(ring_w / ll_rate(up_link, g.scale_up_gbps),
                                  inter_w / ll_rate(out_tier.link, g.scale_out_gbps)))
        use_ll = ll < total
        total = np.where(use_ll, ll, total)
        inter_bound = np.where(use_ll, inter_w / ll_rate(out_tier.link, g.scale_out_gbps)
                               >= ring_w / ll_rate(up_link, g.scale_up_gbps), inter >= intra)
    else:
        inter_bound = inter >= intra
    return total, np.where(inter_bound, "scale-out", "scale-up")


def candidates(op: str, g: CommGroup) -> list[str]:
    algos = ["ring"]
    if op == "all_reduce" and g.domains == 1 and g.in_switch_reduction and g.per_domain > 2 \
            and g.scale_up.link.in_switch is not None:
        algos.append("nvls")
    # NCCL's tree and NVLS-tree exist for all_reduce (and rooted broadcast/reduce chains);
    # all_gather and reduce_scatter are rings only.
    if g.domains > 1 and g.per_domain > 1 and op in ("all_reduce", "broadcast", "reduce"):
        algos.append("hierarchical")
    return algos


def predict(op: str, size, group: CommGroup, algorithm: str = "auto") -> Prediction:
    """Predict a healthy cluster's nccl-tests result for `op` at `size` bytes."""
    import numpy as np

    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")
    sizes = np.asarray(size, dtype=float)
    if np.any(sizes < 0):
        raise ValueError("message size must be >= 0 bytes")
    allowed = candidates(op, group)
    if algorithm != "auto" and algorithm not in allowed:
        raise ValueError(f"algorithm {algorithm!r} does not apply to {op} on this group "
                         f"(applicable: {', '.join(allowed)})")
    chosen = allowed if algorithm == "auto" else [algorithm]
    if group.gpus == 1 and op != "send_recv":
        zeros = np.zeros_like(sizes)
        none = np.full(sizes.shape, "none")       # per size, like every other field (an array in, an array out)
        return Prediction(op, _out(size, sizes), _out(size, zeros), _out(size, zeros), _out(size, zeros),
                          _out(size, none), _out(size, none))

    results = []
    for name in chosen:
        if name == "ring":
            t, neck = _ring(op, sizes, group)
        elif name == "nvls":
            t, neck = _nvls(sizes, group), np.full(sizes.shape, "scale-up")
        else:
            t, neck = _hierarchical(op, sizes, group)
        results.append((np.asarray(t, dtype=float), np.broadcast_to(neck, sizes.shape), name))
    times = np.stack([r[0] for r in results])
    best = np.argmin(times, axis=0)
    t = np.take_along_axis(times, best[None, ...], axis=0)[0]
    algo = np.asarray([r[2] for r in results])[best]
    neck = np.choose(best, [r[1] for r in results]) if len(results) > 1 else results[0][1]
    algbw = np.where(t > 0, sizes / np.where(t > 0, t, 1) / 1e9, 0.0)
    busbw = algbw * bus_factor(op, group.gpus)
    return Prediction(op, _out(size, sizes), _out(size, t), _out(size, algbw), _out(size, busbw),
                      _out(size, algo), _out(size, np.asarray(neck)))


def predict_times_s(op: str, sizes, group: CommGroup):
    """`predict(op, sizes, group).time_s` for an array of sizes: the least time over the
    applicable algorithms, without the bandwidths and names `predict` adds (the serving
    planner's step-time tables ask for hundreds of sizes per replica shape)."""
    import numpy as np

    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")
    s = np.asarray(sizes, dtype=float)
    if (s < 0).any():
        raise ValueError("message size must be >= 0 bytes")
    if group.gpus == 1 and op != "send_recv":
        return np.zeros_like(s)
    best = None
    for name in candidates(op, group):
        if name == "ring":
            t = _ring(op, s, group)[0]
        elif name == "nvls":
            t = _nvls(s, group)
        else:
            t = _hierarchical(op, s, group)[0]
        t = np.broadcast_to(np.asarray(t, dtype=float), s.shape)
        best = t if best is None else np.minimum(best, t)
    return np.array(best, dtype=float)


def _out(template, value):
    """Scalars in, scalars out."""
    import numpy as np

    if np.ndim(template) == 0:
        v = np.asarray(value).reshape(())
        return v.item()
    return np.asarray(value)


# The scalar fast path lives beside this module; its names are part of this module's interface.
from gpucluster.model.collective_scalar import predict_time_s, transfer_time_s  # noqa: E402

__all__ = ["ALGORITHMS", "OPS", "CommGroup", "Prediction", "Tier", "bus_factor", "candidates", "predict",
           "predict_time_s", "predict_times_s", "ring_chunk", "ring_steps", "transfer_time", "transfer_time_s"]
