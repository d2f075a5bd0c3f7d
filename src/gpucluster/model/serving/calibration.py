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
from functools import lru_cache

from gpucluster.catalog import catalog


@lru_cache(maxsize=None)
def serving_efficiency(gpu_name: str, precision: str) -> tuple[float, str]:
    """(factor, where it comes from) for a chip and the GEMMs' math precision; the fitted
    values live in each GPU's catalog entry (efficiency.serving_fraction)."""
    gpu = catalog.gpus.get(gpu_name)
    table = gpu.efficiency.serving_fraction
    if precision in table:
        src = gpu.sources[table[precision].source]
        return table[precision].value, f"{src.kind}: {src.title}"
    if table:
        v = statistics.median(x.value for x in table.values())
        return v, f"estimate: this chip's factor for another precision ({v:g})"
    fitted = [x.value for _, g in catalog.gpus.items() for x in g.efficiency.serving_fraction.values()]
    if not fitted:
        return 1.0, "no published serving run fitted: kernel-level model as is"
    v = statistics.median(fitted)
    return v, f"estimate: median of the chips fitted on published serving runs ({v:g})"
