"""Serving efficiency: how much slower real serving stacks run than the kernel-level model.

The step model (step_time.py) adds microbenchmark-calibrated kernel times. Published
serving runs are slower: engines leave gaps between kernels, FP8 GEMMs at serving shapes
(skinny tensor-parallel slices, small M) reach less than the square microbenchmarks the
GEMM curves are fitted to, and clocks drop under sustained load. One factor per chip and
math precision divides all device time of a step (kernels and collectives, not the host's
per-step work): fitted on published serving measurements by
`python benchmarks/inference_accuracy.py --fit` (device time predicted / device time
measured, median over the chip's cases), never per case.

Where a chip and precision have no published serving run, the median of the fitted
factors is used and marked as an estimate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Fitted:
    value: float
    source: str


SERVING_EFFICIENCY: dict[tuple[str, str], Fitted] = {
    ("H100-SXM5-80GB", "fp8"): Fitted(
        0.745, "fitted by benchmarks/inference_accuracy.py --fit on shared/validation/inference-public.yaml: "
              "Azure AI-benchmarking-guide ND H100 v5, TensorRT-LLM Llama 3 70B FP8 TP8, batch 16 and 64 "
              "(device-time ratios 0.732 and 0.757, median 0.745)"),
}


def serving_efficiency(gpu_name: str, precision: str) -> tuple[float, str]:
    """(factor, where it comes from) for a chip and the GEMMs' math precision."""
    key = (gpu_name, precision)
    if key in SERVING_EFFICIENCY:
        f = SERVING_EFFICIENCY[key]
        return f.value, f.source
    same = [f.value for (g, _), f in SERVING_EFFICIENCY.items() if g == gpu_name]
    if same:
        v = statistics.median(same)
        return v, f"estimate: this chip's factor for another precision ({v:g})"
    if not SERVING_EFFICIENCY:
        return 1.0, "no published serving run fitted: kernel-level model as is"
    v = statistics.median(f.value for f in SERVING_EFFICIENCY.values())
    return v, f"estimate: median of the chips fitted on published serving runs ({v:g})"
