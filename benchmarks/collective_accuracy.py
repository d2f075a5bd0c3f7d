"""Accuracy of the collective model on published nccl-tests measurements, per file.

Targets: shared/validation/collective-public.yaml (8-GPU all-reduce, issue 2) median |error|
<= 10% and no case over 25%; collective-smallgroups-public.yaml (2 and 4 GPUs in a node, 2 nodes
over RoCE; issue 21) median <= 10%, max <= 35%. Both files are what benchmarks/collective_fit.py
fitted links.yaml on, so these figures are in-sample: the out-of-sample figure is that script's
leave-one-table-out (docs/collectives.md).

    python benchmarks/collective_accuracy.py [FILE ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpucluster.validate.runner import run_file, summarize

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT.parent / "shared" / "validation"
TARGETS = {"collective-public.yaml": (0.10, 0.25), "collective-smallgroups-public.yaml": (0.10, 0.35)}
DEFAULT_TARGET = (0.10, 0.35)


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or [VALIDATION / name for name in TARGETS]
    ok = True
    for f in files:
        results = [r for r in run_file(f) if r.kind == "collective"]
        print(f"{f.name}\n{'case':40} {'measured':>9} {'predicted':>9} {'error':>7}")
        for r in results:
            pred = f"{r.predicted:9.2f}" if r.predicted is not None else "        -"
            err = f"{100 * r.error:+6.1f}%" if r.error is not None else r.reason
            print(f"{r.id:40} {r.measured:9.2f} {pred} {err}")
        s = summarize(results)["collective"]
        med, worst = s["median_abs_error"], s["max_abs_error"]
        t_med, t_max = TARGETS.get(f.name, DEFAULT_TARGET)
        passed = med <= t_med and worst <= t_max
        ok &= passed
        print(f"cases {s['cases']}, predicted {s['predicted']} (in-sample: fitted on this file)")
        print(f"median |error| {100 * med:.1f}% (target <= {100 * t_med:.0f}%)   max |error| {100 * worst:.1f}% "
              f"(target <= {100 * t_max:.0f}%)   {'PASS' if passed else 'FAIL'}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
