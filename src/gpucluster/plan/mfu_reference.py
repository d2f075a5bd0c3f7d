"""The MFU a plan is checked against: the best published training run on the chip, or on its
nearest validated sibling when the chip has none.

A predicted MFU above every run anyone has published is not impossible, but nothing backs it, so a
plan says so (plan/confidence.py turns the reference into the flag and the assumption). The
reference is the same for every chip:

- the chip's own `efficiency.best_published_mfu` for the precision (fp16 and bf16 stand for each
  other: same tensor-core rate on every catalog chip), with its source;
- else its nearest *validated sibling*'s: a catalog GPU of the same `vendor` and `architecture`
  (catalog fields, never names: Hopper, Ampere, Blackwell, CDNA3...) that has a figure for that
  precision. Nearest: the closest peak TFLOP/s at that precision (log ratio), then the closest HBM
  bandwidth, then the name (deterministic). So H200, H800, H100 NVL/PCIe borrow H100 SXM5's
  figures and A100 40GB borrows A100 80GB's; B200 <-> GB200 and MI325X <-> MI300X would borrow
  from each other as soon as one of them has a published figure.
- else none: the plan lists "no published run to compare the MFU with" as an assumption.

MFU is normalised by each chip's own peak, so a sibling's figure carries over as a fraction: the
same die (H200 vs H100) or the same architecture at another clock runs the same kernels at the
same share of its peak, up to memory effects nobody has published a number for.

Margin: none (MARGIN = 0). The reference is a published measurement; a margin would be a number
with no source, and it would hide the plans the check exists for. The flag is a warning, never a
refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu
from gpucluster.catalog.siblings import nearest

# Added to the reference before a plan is flagged; see the module docstring for why it is zero.
MARGIN = 0.0
# Precisions with the same tensor-core rate, tried when the chip has no figure for the asked one.
_HALF = {"fp16": "bf16", "bf16": "fp16"}


@dataclass(frozen=True)
class MfuReference:
    gpu: str              # the chip the plan runs on
    precision: str        # the plan's precision
    value: float          # the best published MFU (a fraction of peak)
    from_gpu: str         # the chip the published run was on (== gpu unless borrowed)
    from_precision: str   # the precision of the published run (bf16 for an fp16 plan, and back)
    source: str           # the catalog source's title
    margin: float = MARGIN

    @property
    def borrowed(self) -> bool:
        return self.from_gpu != self.gpu

    @property
    def threshold(self) -> float:
        return self.value + self.margin

    def where(self) -> str:
        """On which chip the reference run was, and why that chip."""
        if not self.borrowed:
            return self.gpu
        return (f"{self.from_gpu}, the nearest validated sibling of {self.gpu} (same vendor and architecture; "
                f"no published {self.precision} training run on {self.gpu} itself)")

    def describe(self) -> str:
        """The figure with its chip and source, e.g. `43.0% on H100-SXM5-80GB, the nearest ... (Dubey...)`."""
        on = f" on {self.where()}" if self.borrowed else ""
        return f"{100 * self.value:.1f}%{on} ({self.source})"

    def flag(self, mfu: float) -> str | None:
        """The warning when `mfu` is above the reference (plus the margin), else None."""
        if mfu <= self.threshold:
            return None
        return (f"MFU {100 * mfu:.1f}% is above the best published {self.from_precision} run on {self.where()}: "
                f"{100 * self.value:.1f}% ({self.source})")

    def to_json(self) -> dict:
        return {"value": self.value, "gpu": self.from_gpu, "precision": self.from_precision,
                "borrowed": self.borrowed, "source": self.source, "margin": self.margin}


def _own(gpu: Gpu, precision: str) -> tuple[str, float, str] | None:
    table = gpu.efficiency.best_published_mfu
    key = precision if precision in table else _HALF.get(precision)
    if key not in table:
        return None
    entry = table[key]
    return key, entry.value, gpu.sources[entry.source].title


def mfu_reference(gpu_name: str, precision: str) -> MfuReference | None:
    """The plausibility reference of an MFU on `gpu_name` at `precision`: the chip's own best
    published run, else its nearest validated sibling's (module docstring), else None."""
    gpu = catalog.gpus.get(gpu_name)
    own = _own(gpu, precision)
    if own is not None:
        return MfuReference(gpu.name, precision, own[1], gpu.name, own[0], own[2])
    found = nearest(gpu, precision, lambda g: _own(g, precision))
    if found is None:
        return None
    sib, (key, value, source) = found
    return MfuReference(gpu.name, precision, value, sib.name, key, source)
