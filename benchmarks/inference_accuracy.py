"""Accuracy of the serving model on published serving measurements.

Target (issue 4): median absolute error <= 15% on shared/validation/inference-public.yaml.
Prints, per case, the calibrated prediction (what `gpucluster validate` reports) and the
kernel-level model before the serving-efficiency factor, so that the factor's effect is
visible; `--fit` prints the factor per chip and math precision that the cases imply
(each GPU's catalog entry records its fitted value under efficiency.serving_fraction).

    python benchmarks/inference_accuracy.py [--fit] [FILE ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from gpucluster.model.serving.step_time import STEP_OVERHEAD_S
from gpucluster.validate.inference_predictor import predict_batch, replica_for
from gpucluster.validate.predictors import Unsupported
from gpucluster.validate.runner import load_file, run_file

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "validation" / "inference-public.yaml"


def raw_and_fit(path: Path) -> tuple[dict[str, float], dict[tuple[str, str], list[float]]]:
    """Uncalibrated tokens/s per case, and device-time ratios (predicted / measured) per chip."""
    raw: dict[str, float] = {}
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for case in load_file(path).cases:
        if case.kind != "inference" or "tokens_per_s" not in case.measured:
            continue
        try:
            rep, sv, replicas = replica_for(case, calibrated=False)
        except Unsupported:
            continue
        per = -(-sv.batch // replicas)
        lat = predict_batch(rep, per, sv.input_tokens, sv.output_tokens)["latency_s"]
        raw[case.id] = sv.batch * sv.output_tokens / lat
        host = STEP_OVERHEAD_S * sv.output_tokens          # one prefill + output - 1 decode steps
        measured_lat = sv.batch * sv.output_tokens / case.measured["tokens_per_s"]
        ratios[(rep.gpu.name, rep.quant.compute(rep.gpu))].append((lat - host) / (measured_lat - host))
    return raw, ratios


def main(argv: list[str]) -> int:
    fit = "--fit" in argv
    files = [Path(a) for a in argv if a != "--fit"] or [DEFAULT]
    print(f"{'case':36} {'measured':>10} {'predicted':>10} {'error':>8}   {'uncalibrated':>12} {'error':>8}")
    errs = []
    all_ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f in files:
        raw, ratios = raw_and_fit(f)
        for k, v in ratios.items():
            all_ratios[k] += v
        for r in run_file(f):
            if r.kind != "inference" or r.metric != "tokens_per_s":
                continue
            if r.error is None:
                print(f"{r.id:36} {r.measured:10.2f}          -   {r.reason}")
                continue
            errs.append(abs(r.error))
            u = raw.get(r.id)
            ue = f"{100 * (u - r.measured) / r.measured:+7.1f}%" if u else "       -"
            print(f"{r.id:36} {r.measured:10.2f} {r.predicted:10.2f} {100 * r.error:+7.1f}%   "
                  f"{u or 0:12.2f} {ue}")
    if not errs:
        print("no inference case predicted")
        return 1
    med = statistics.median(errs)
    print(f"\ncases predicted {len(errs)}; median |error| {100 * med:.1f}% (target <= 15%), "
          f"max {100 * max(errs):.1f}%")
    if fit:
        print("\nserving efficiency implied (device time predicted / measured, median per chip and precision):")
        for (gpu, prec), vals in sorted(all_ratios.items()):
            print(f"  {gpu:18} {prec:5} {statistics.median(vals):.3f}   "
                  f"({len(vals)} cases: {', '.join(f'{v:.3f}' for v in vals)})")
    ok = med <= 0.15
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
