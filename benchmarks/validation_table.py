"""Regenerate docs/validation-table.md: the model's prediction against the published
measurement for every case shipped in shared/validation/ (collectives, training, inference).

    python benchmarks/validation_table.py [--shared ../shared] [--out docs/validation-table.md] [--check]

--check exits 1 when the file on disk differs from what the cases give now (for CI or a
pre-commit hook), without writing it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpucluster.validate.runner import run_file, summarize

ROOT = Path(__file__).resolve().parents[1]


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def table(files: list[Path]) -> str:
    results = [r for f in files for r in run_file(f)]
    lines = ["# Validation table: predicted against measured", "",
             "Every case shipped in `shared/validation/` (the `gpucluster-validation/v1` format): the published",
             "measurement, the model's prediction and the error (predicted - measured) / measured. Regenerate",
             "with `python benchmarks/validation_table.py` (or see one file with `gpucluster validate FILE`);",
             "docs/validation.md says where each case comes from and what the errors mean.", "",
             "## Summary (absolute error; coverage of the 80% intervals)", "",
             "Coverage: the share of predictions whose measured value lies inside their 80% interval",
             "(catalog/data/intervals.yaml). The table was calibrated on these files, so this coverage is",
             "in-sample; the cross-validated one is in docs/validation.md. Bias (in-sample too): the mean of predicted speed /",
             "measured - 1 (a time's error flipped), positive where the model predicts faster than measured.", "",
             "| kind | cases | predicted | median | mean | max | bias | coverage | median half-width |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, row in summarize(results).items():
        pct = ["-" if row[k] is None else f"{100 * row[k]:{'+' if k == 'mean_speed_bias' else ''}.1f}%"
               for k in ("median_abs_error", "mean_abs_error", "max_abs_error", "mean_speed_bias", "coverage",
                         "median_half_width")]
        lines.append(f"| {kind} | {row['cases']} | {row['predicted']} | {' | '.join(pct)} |")
    for f in files:
        rows = [r for r in results if r.file and Path(r.file).name == f.name] or \
               [r for r in run_file(f)]
        lines += ["", f"## {f.name}", "", "| case | kind | metric | measured | predicted | error | 80% interval | source |",
                  "|---|---|---|---:|---:|---:|---:|---|"]
        for r in rows:
            err = f"{100 * r.error:+.1f}%" if r.error is not None else f"not predicted: {r.reason or '-'}"
            band = "-" if r.interval is None else (f"{_num(r.interval[0])}-{_num(r.interval[1])}"
                                                   + ("" if r.covered else " (outside)"))
            src = (r.source or "").replace("|", "/").replace("\n", " ")
            lines.append(f"| {r.id} | {r.kind} | {r.metric} | {_num(r.measured)} | {_num(r.predicted)} | {err} | "
                         f"{band} | {src} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.environ.get("GPUCLUSTER_SHARED", str(ROOT.parent / "shared")))
    ap.add_argument("--out", default=str(ROOT / "docs" / "validation-table.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is out of date; write nothing")
    args = ap.parse_args()
    files = sorted((Path(args.shared) / "validation").glob("*.yaml"))
    if not files:
        print(f"no validation cases under {args.shared}/validation", file=sys.stderr)
        return 2
    text = table(files)
    out = Path(args.out)
    if args.check:
        same = out.is_file() and out.read_text() == text
        print(f"{out}: {'up to date' if same else 'out of date: run python benchmarks/validation_table.py'}")
        return 0 if same else 1
    out.write_text(text)
    print(f"wrote {out} ({len(files)} files, {text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
