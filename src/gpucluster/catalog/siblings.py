"""A chip's *siblings*: catalog GPUs of the same `vendor` and `architecture` (catalog fields,
never names), and the nearest of them. A chip with no figure of its own (a best published MFU, a
sustained fraction fitted on training runs) borrows its nearest sibling's, labelled as borrowed:
the same die (H200 vs H100) or the same architecture at another clock runs the same kernels at
the same share of its own peak, up to effects nobody has published a number for.

Nearest: the closest peak TFLOP/s at the precision asked (log ratio), then the closest HBM
bandwidth, then the name (deterministic)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TypeVar

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu

T = TypeVar("T")


def siblings(gpu: Gpu) -> list[Gpu]:
    """Catalog GPUs of the same vendor and architecture, the chip itself (and its power-capped
    variants) left out."""
    base = gpu.name.split("@")[0]
    return [g for name, g in catalog.gpus.items()
            if name != base and g.vendor == gpu.vendor and g.architecture == gpu.architecture]


def distance(gpu: Gpu, other: Gpu, precision: str) -> tuple[float, float, str]:
    def log_ratio(a: float | None, b: float | None) -> float:
        return abs(math.log(a / b)) if a and b else math.inf
    mine, theirs = gpu.peak_tflops.get(precision), other.peak_tflops.get(precision)  # type: ignore[call-overload]
    return (log_ratio(mine.value if mine else None, theirs.value if theirs else None),
            log_ratio(gpu.memory.bandwidth_tbps.value, other.memory.bandwidth_tbps.value), other.name)


def nearest(gpu: Gpu, precision: str, figure: Callable[[Gpu], T | None],
            candidates: Iterable[Gpu] | None = None) -> tuple[Gpu, T] | None:
    """The nearest sibling for which `figure` is not None, with that figure; None if no sibling has one."""
    found = [(g, f) for g in (siblings(gpu) if candidates is None else candidates) if (f := figure(g)) is not None]
    if not found:
        return None
    return min(found, key=lambda gf: distance(gpu, gf[0], precision))
