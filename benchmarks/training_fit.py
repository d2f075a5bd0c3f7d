"""Fit each chip's sustained fraction (per precision) on published training runs.

For every training case whose step is dominated by compute (compute >= 60% of the
predicted step, so that the fit is not bent by communication), the ratio of
measured to predicted throughput is taken with the chip's sustained fraction set
to 1; the median per (chip, precision) is the value to record in the chip's
catalog entry (efficiency.sustained_fraction). The median, not the mean, so
that a case whose slowdown the model does not explain (DeepSpeed ZeRO-3 at 1536
GPUs in 2021) cannot drag every prediction for the chip with it.

    python benchmarks/training_fit.py [FILE ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from gpucluster.model.training import compute
from gpucluster.validate.runner import load_file
from gpucluster.validate.predictors import fabric_for
from gpucluster.validate.training_predictor import Training, predict_training
from gpucluster.specs.validation_case import Hardware

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "validation" / "training-public.yaml"
SPEED = {"iteration_s": -1, "tflops_per_gpu": 1, "tokens_per_s_per_gpu": 1, "mfu": 1}


def main(argv: list[str]) -> int:
    # Predict with sustained fraction 1 everywhere.
    compute.sustained.cache_clear()
    compute.gemm_curve.cache_clear()
    compute.attention_tflops.cache_clear()
    original = compute.sustained
    compute.sustained = lambda gpu, prec: (1.0, "fit")  # type: ignore[assignment]
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    try:
        from gpucluster.model.training import step
        step._layer_cached.cache_clear()
        for path in [Path(a) for a in argv] or [DEFAULT]:
            for case in load_file(path).cases:
                if case.kind != "training":
                    continue
                pred = predict_training(case)
                hw = Hardware.model_validate(case.hardware)
                prec = Training.model_validate(case.training).precision
                metric, measured = next(iter(case.measured.items()))
                r = (measured / pred[metric]) ** SPEED[metric]
                share = pred.get("_compute_share", 1.0)
                keep = share >= 0.6
                print(f"{case.id:32} {fabric_for(hw).gpu_name:16} {prec:5} ratio {r:.3f}"
                      + ("" if keep else "  (not compute-bound: left out)"))
                if keep:
                    ratios[(fabric_for(hw).gpu_name, prec)].append(r)
    finally:
        compute.sustained = original
    print()
    for (gpu, prec), rs in sorted(ratios.items()):
        med = statistics.median(rs)
        print(f"{gpu} {prec}: sustained_fraction = {min(med, 1.0):.2f} (median of {len(rs)} cases, raw {med:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
