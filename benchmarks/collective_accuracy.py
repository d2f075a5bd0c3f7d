"""Accuracy of the collective model on published nccl-tests measurements.

Target (issue 2): median absolute error <= 10% and no case over 25% on
shared/validation/collective-public.yaml. Also prints a size hold-out check:
the ramp parameters refitted on every other size predict the sizes left out,
which tells whether the shape generalises or merely memorises the rows.

    python benchmarks/collective_accuracy.py [FILE ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpucluster.validate.runner import run_file, summarize

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "validation" / "collective-public.yaml"


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or [DEFAULT]
    results = [r for f in files for r in run_file(f) if r.kind == "collective"]
    print(f"{'case':40} {'measured':>9} {'predicted':>9} {'error':>7}")
    for r in results:
        pred = f"{r.predicted:9.1f}" if r.predicted is not None else "        -"
        err = f"{100 * r.error:+6.1f}%" if r.error is not None else r.reason
        print(f"{r.id:40} {r.measured:9.1f} {pred} {err}")
    s = summarize(results)["collective"]
    med, worst = s["median_abs_error"], s["max_abs_error"]
    print(f"\ncases {s['cases']}, predicted {s['predicted']}")
    print(f"median |error| {100 * med:.1f}% (target <= 10%)   max |error| {100 * worst:.1f}% (target <= 25%)")
    ok = med <= 0.10 and worst <= 0.25
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
