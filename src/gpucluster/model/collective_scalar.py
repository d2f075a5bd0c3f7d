"""The collective model's scalar fast path: one size, Python floats, no numpy.

The training model asks for thousands of single collective times per search; numpy's per-call
overhead on 0-d arrays (~0.3 ms per prediction) dominated it. These mirror collectives.py's
_ring, _nvls and _hierarchical on floats, time only; tests/model/test_collectives.py holds them
equal to `predict` on random groups and sizes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucluster.catalog.models import Link, Ramp
    from gpucluster.model.collectives import CommGroup


def transfer_time_s(w: float, chunk: float, gbps: float, ramp: Ramp) -> float:
    """`transfer_time` for one size, as a float, without numpy."""
    if w <= 0:
        return 0.0
    bw = ramp.efficiency.value * gbps * 1e9
    return w / bw * (1 + (ramp.half_bytes.value / (chunk if chunk > 0 else 1.0)) ** ramp.ramp_exponent.value)


def _lat(link: Link, steps: int) -> float:
    return (link.base_latency_us.value + steps * link.hop_latency_us.value) * 1e-6


def _phase_f(link: Link, steps: int, w: float, chunk: float, gbps: float, ramp: Ramp) -> float:
    """The faster of the bulk protocols and LL over one tier (collectives._phase)."""
    bulk = _lat(link, steps) + transfer_time_s(w, chunk, gbps, ramp)
    ll = link.low_latency
    if ll is None:
        return bulk
    t_ll = (link.base_latency_us.value + steps * ll.hop_latency_us.value) * 1e-6 + (
        w / (ll.efficiency.value * gbps * 1e9) if w > 0 else 0.0)
    return min(bulk, t_ll)


def _ring_f(op: str, s: float, g: CommGroup) -> float:
    n = g.gpus
    w = s * _c.bus_factor(op, n)
    chunk = s if op in ("broadcast", "reduce", "send_recv") else s / max(n, 1)
    up = _phase_f(g.scale_up.link, _c.ring_steps(op, n), w, chunk, g.scale_up_gbps, g.scale_up.ramp())
    if g.per_domain == 1:
        up = 0.0
    if g.domains == 1:
        return up
    out_tier = g.scale_out
    assert out_tier is not None
    if op == "all_to_all":
        up = _phase_f(g.scale_up.link, g.per_domain - 1, s * (g.per_domain - 1) / n, chunk, g.scale_up_gbps,
                      g.scale_up.ramp())
        out = _phase_f(out_tier.link, g.domains - 1, s * (n - g.per_domain) / n, chunk, g.scale_out_gbps,
                       out_tier.ramp())
    else:
        out = _phase_f(out_tier.link, _c.ring_steps(op, n), w / g.per_domain, chunk, g.scale_out_gbps, out_tier.ramp())
    return max(up, out)


def _hierarchical_f(op: str, s: float, g: CommGroup) -> float:
    out_tier = g.scale_out
    assert out_tier is not None
    d, p = g.domains, g.per_domain
    up_link, out_link = g.scale_up.link, out_tier.link
    if op == "all_reduce":
        ring_w, lat_steps = s * _c.bus_factor("all_reduce", p), _c.ring_steps("all_reduce", p)
        if g.in_switch_reduction and up_link.in_switch is not None:
            intra = transfer_time_s(s, s, g.scale_up_gbps, g.scale_up.ramp(True))
            intra_lat = _lat(up_link, 2)
        else:
            intra = transfer_time_s(ring_w, s / p, g.scale_up_gbps, g.scale_up.ramp())
            intra_lat = _lat(up_link, lat_steps)
        inter_w, inter_chunk = s / p * _c.bus_factor("all_reduce", d), s / p
    else:  # broadcast, reduce
        ring_w, lat_steps = s, _c.ring_steps(op, p)
        intra = transfer_time_s(s, s, g.scale_up_gbps, g.scale_up.ramp())
        intra_lat = _lat(up_link, lat_steps)
        inter_w, inter_chunk = s / p, s / p
    inter_steps = 2 * math.ceil(math.log2(d))
    inter = transfer_time_s(inter_w, inter_chunk, g.scale_out_gbps, out_tier.ramp())
    total = max(intra, inter) + intra_lat + _lat(out_link, inter_steps)
    up_ll, out_ll = up_link.low_latency, out_link.low_latency
    if up_ll is not None and out_ll is not None:
        ll = ((up_link.base_latency_us.value + lat_steps * up_ll.hop_latency_us.value
               + out_link.base_latency_us.value + out_ll.hop_latency_us.value * inter_steps) * 1e-6
              + max(ring_w / (up_ll.efficiency.value * g.scale_up_gbps * 1e9),
                    inter_w / (out_ll.efficiency.value * g.scale_out_gbps * 1e9)))
        total = min(total, ll)
    return total


def predict_time_s(op: str, size: float, group: CommGroup) -> float:
    """`predict(op, size, group).time_s` for one size, as a float, without numpy."""
    if op not in _c.OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(_c.OPS)})")
    if size < 0:
        raise ValueError("message size must be >= 0 bytes")
    if group.gpus == 1 and op != "send_recv":
        return 0.0
    best = float("inf")
    for name in _c.candidates(op, group):
        if name == "ring":
            t = _ring_f(op, size, group)
        elif name == "nvls":
            t = _lat(group.scale_up.link, 2) + transfer_time_s(size, size, group.scale_up_gbps,
                                                               group.scale_up.ramp(in_switch=True))
        else:
            t = _hierarchical_f(op, size, group)
        best = min(best, t)
    return best


# Imported last: collectives.py imports this module at its own end, so either may load first.
from gpucluster.model import collectives as _c  # noqa: E402
