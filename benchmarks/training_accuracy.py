"""Accuracy of the training planner on published training runs.

Targets (issue 3): median absolute error <= 10%, no case over 25%; and ranking:
for one model on one GPU count, layouts ordered by predicted speed as by measured
speed (pairwise agreement printed).

    python benchmarks/training_accuracy.py [FILE ...]
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpucluster.validate.runner import load_file, run_file

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "validation"
DEFAULT = [SHARED / "training-public.yaml", SHARED / "training-vtrain-single-public.yaml",
           SHARED / "training-sharded-public.yaml",
           *sorted((ROOT / "validation").glob("training-*.yaml"))]
FASTER_IS_LOWER = {"iteration_s"}


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or DEFAULT
    rows = [r for f in files for r in run_file(f) if r.kind == "training"]
    print(f"{'case':32} {'metric':22} {'measured':>10} {'predicted':>10} {'error':>8}")
    for r in rows:
        pred = f"{r.predicted:10.2f}" if r.predicted is not None else "         -"
        err = f"{100 * r.error:+7.1f}%" if r.error is not None else f"  {r.reason}"
        print(f"{r.id:32} {r.metric:22} {r.measured:10.2f} {pred} {err}")
    # One error per case (its first metric), so that a case with two metrics does not count twice.
    first: dict[str, Any] = {}
    for r in rows:
        first.setdefault(r.id, r)
    errs = [abs(r.error) for r in first.values() if r.error is not None]
    med, worst = statistics.median(errs), max(errs)
    over = [r.id for r in first.values() if r.error is not None and abs(r.error) > 0.25]
    print(f"\ncases {len(first)}, predicted {len(errs)}")
    print(f"median |error| {100 * med:.1f}% (target <= 10%)   max |error| {100 * worst:.1f}% (target <= 25%)")
    if over:
        print(f"over 25%: {', '.join(over)}")

    # Ranking: cases of one model on one GPU count and chip, compared pairwise by speed.
    groups = defaultdict(list)
    for path in files:
        for case in load_file(path).cases:
            if case.kind != "training" or case.id not in first:
                continue
            # model and training are the case's extra sections (Case allows them by kind).
            model, training, hw = getattr(case, "model", None), getattr(case, "training", None), case.hardware or {}
            key = (json.dumps(model, sort_keys=True), hw["gpus"], hw["gpu"],
                   training.get("global_batch") if isinstance(training, dict) else None)
            groups[key].append(first[case.id])
    agree = total = 0
    for members in groups.values():
        for a, b in itertools.combinations(members, 2):
            if a.metric != b.metric or a.predicted is None or b.predicted is None:
                continue
            sign = -1 if a.metric in FASTER_IS_LOWER else 1
            measured = sign * (a.measured - b.measured)
            predicted = sign * (a.predicted - b.predicted)
            total += 1
            ok = measured * predicted > 0
            agree += ok
            if not ok and len(members) < 40:
                print(f"ranking disagrees: {a.id} vs {b.id}")
    print(f"ranking: {agree} of {total} same-model, same-GPU-count, same-batch pairs ordered as measured "
          f"({100 * agree / max(total, 1):.1f}%)")
    ok = med <= 0.10 and worst <= 0.25
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
