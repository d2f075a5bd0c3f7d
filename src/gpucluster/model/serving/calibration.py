"""Serving efficiency: how much slower real serving stacks run than the kernel-level model.

The step model (step_time.py) adds microbenchmark-calibrated kernel times. Published
serving runs are slower: engines leave gaps between kernels, FP8 GEMMs at serving shapes
(skinny tensor-parallel slices, small M) reach less than the square microbenchmarks the
GEMM curves are fitted to, and clocks drop under sustained load. One factor per chip and
math precision divides all device time of a step (kernels and collectives, not the host's
per-step work): fitted on published serving measurements by
`python benchmarks/inference_accuracy.py --fit` (device time predicted / device time
measured, median over the chip's cases), never per case.

Where a chip and precision have no published serving run of their own, nothing is copied
from another chip or precision: DEFAULT_SERVING_FRACTION applies and is marked as an
assumption.
"""

from __future__ import annotations

from functools import cache

from gpucluster.catalog import catalog

# A documented assumption, not a fit: the one chip with published serving runs (H100 FP8)
# reached 0.72 of the kernel-level model; chips without their own runs are not assumed faster.
DEFAULT_SERVING_FRACTION = 0.72


@cache
def serving_efficiency(gpu_name: str, precision: str) -> tuple[float, str]:
    """(factor, where it comes from) for a chip and the GEMMs' math precision; the fitted
    values live in each GPU's catalog entry (efficiency.serving_fraction)."""
    gpu = catalog.gpus.get(gpu_name)
    table = gpu.efficiency.serving_fraction
    if precision in table:
        src = gpu.sources[table[precision].source]
        return table[precision].value, f"{src.kind}: {src.title}"
    return DEFAULT_SERVING_FRACTION, (f"assumption: no published {precision} serving run on {gpu.name}; "
                                      f"{DEFAULT_SERVING_FRACTION:g} of the kernel-level model (documented default)")
