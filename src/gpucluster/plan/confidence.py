"""What a training estimate rests on: measured, fitted on the chip's own published runs, or assumed.

Every figure a plan prints comes from the same model; what differs is how much of it was
checked on this chip, precision and stack. The plan lists each assumption in the
terminal, the JSON (`assumptions`, `confidence`) and the HTML, and says when its MFU is
above the best published run on that chip and precision (catalog
`efficiency.best_published_mfu`), because a practitioner who sees an MFU nobody has
achieved should know the tool knows it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog import catalog
from gpucluster.model.training import attention
from gpucluster.model.training.compute import gemm_curve, sustained
from gpucluster.model.training.power import clock_fraction
from gpucluster.model.training.layout import Layout

_HALF = {"fp16": "bf16", "bf16": "fp16"}


@dataclass(frozen=True)
class Confidence:
    assumptions: list[str]
    above_best_published: str | None
    best_published: str | None

    @property
    def level(self) -> str:
        """validated: the chip and precision were fitted on their own published runs and the plan
        stays within the best published MFU; assumed: something here is an assumption."""
        return "assumed" if self.assumptions or self.above_best_published else "validated"

    def to_json(self) -> dict:
        return {"confidence": self.level, "assumptions": self.assumptions,
                "above_best_published": self.above_best_published, "best_published": self.best_published}


def confidence(gpu_name: str, lay: Layout, mfu: float) -> Confidence:
    gpu = catalog.gpus.get(gpu_name)
    out: list[str] = []
    curve = gemm_curve(gpu.name, lay.precision)
    if "no " in curve.provenance.split(";")[0] or "one measured" in curve.provenance:
        out.append(f"GEMM rate: {curve.provenance.split(';')[0]}")
    _, why = sustained(gpu.name, lay.precision)
    if "assumed" in why:
        out.append(f"sustained fraction: {why}")
    if lay.flash_attention:
        rate = attention.kernel_rate(gpu.name, attention.resolve_on(lay.attention_kernel, gpu.name))
        if "assumption" in rate.provenance:
            out.append(f"fused attention rate: {rate.provenance}")
    _, clock_why = clock_fraction(gpu.name)
    if clock_why:
        out.append(f"compute clock: {clock_why}")
    if gpu.efficiency.hbm_fraction is None:
        out.append(f"HBM bandwidth: no STREAM-like measurement on {gpu.name}: the lowest fraction among measured chips (conservative)")
    if gpu.sm_count is None:
        out.append(f"no SM count for {gpu.name}: GEMM wave quantization ignored")
    table = gpu.efficiency.best_published_mfu
    key = lay.precision if lay.precision in table else _HALF.get(lay.precision)
    best = above = None
    if key in table:
        entry = table[key]
        best = f"{100 * entry.value:.1f}% ({gpu.sources[entry.source].title})"
        if mfu > entry.value:
            above = (f"MFU {100 * mfu:.1f}% is above the best published {gpu.name} {lay.precision} run: "
                     f"{best}")
    else:
        out.append(f"no published {lay.precision} training run on {gpu.name} to compare the MFU with")
    return Confidence(out, above, best)
