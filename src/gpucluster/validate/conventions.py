"""How a published source counts the metric it reports: a fact about the measurement, not the run.

The predictors never read `source` or `notes` (every setting of the run is a field of
the case, or a documented default). What a source *means* by a reported number is a
different matter: "model TFLOP/s per GPU" excludes recompute work in Megatron, NeMo and
Megatron-Bridge (shared/validation/README.md), but Narayanan et al. 2021 count it: their
throughput formula (Appendix, 96 B s l h^2 (1 + s/6h + V/16lh)) includes the extra forward
pass of activation recomputation. The comparison therefore reads `tflops_per_gpu` of
those sources as hardware TFLOP/s. This table is the only place a source string is
read, and only to pick which predicted figure the measured one is compared with.
"""

from __future__ import annotations

import re

# (pattern on the source string, measured metric, the predicted figure it is compared with)
METRIC_CONVENTIONS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"narayanan\s+et\s+al\.?\s*,?\s*2021", re.IGNORECASE), "tflops_per_gpu", "hardware_tflops_per_gpu"),
)


def compared_metric(source: str | None, metric: str) -> str:
    """The predicted figure a measured `metric` of `source` is compared with."""
    for pattern, measured, predicted in METRIC_CONVENTIONS:
        if measured == metric and pattern.search(source or ""):
            return predicted
    return metric
