"""`gpucluster validate FILE...`: the model against published measurements."""

from __future__ import annotations

from typing import Annotated

import typer

from gpucluster.cli.render import console, num, print_json, safe


def validate(
    files: Annotated[list[str], typer.Argument(help="Files in the gpucluster-validation/v1 format")],
    json_out: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object")] = False,
) -> None:
    """Predict each case's measured metric and print the error (predicted - measured) / measured."""
    from gpucluster.validate.runner import coverage_by_file, run_file, summarize

    results = [r for f in files for r in run_file(f)]
    summary = summarize(results)
    by_file = coverage_by_file(results)
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("validate", {"schema": "gpucluster-validate/v1", "cases": [r.to_json() for r in results],
                                     "summary": summary, "coverage": by_file}))
        return

    from rich.table import Table
    t = Table(title="Validation: model vs published measurements", title_justify="left")
    for col in ("id", "kind", "metric", "measured", "predicted", "error %", "interval", "fit"):
        t.add_column(col, justify="left" if col in ("id", "kind", "metric", "fit") else "right")
    for r in results:
        if r.error is None:
            # ids, metrics and reasons come from the validation file: safe()
            t.add_row(safe(r.id), safe(r.kind), safe(r.metric), num(r.measured, 2), "-", f"[dim]{safe(r.reason)}[/dim]")
        else:
            style = "red" if abs(r.error) > 0.25 else "yellow" if abs(r.error) > 0.10 else ""
            err = f"{100 * r.error:+.1f}"
            band = "" if r.interval is None else (f"{num(r.interval[0], 2)}-{num(r.interval[1], 2)}"
                                                  + ("" if r.covered else " [red]outside[/red]"))
            t.add_row(safe(r.id), safe(r.kind), safe(r.metric), num(r.measured, 2), num(r.predicted, 2),
                      f"[{style}]{err}[/{style}]" if style else err, band, "in-sample" if r.in_sample else "")
    console.print(t)
    s = Table(title="Summary (absolute error; bias: mean of predicted speed / measured - 1, + too fast; "
                    "coverage: measured inside the 80% interval)", title_justify="left")
    for col in ("kind", "cases", "predicted", "in-sample", "median %", "mean %", "max %", "bias %", "coverage",
                "half-width %"):
        s.add_column(col, justify="left" if col == "kind" else "right")
    for kind, row in summary.items():
        pct = [None if row[k] is None else 100 * row[k] for k in ("median_abs_error", "mean_abs_error", "max_abs_error")]
        bias = None if row["mean_speed_bias"] is None else f"{100 * row['mean_speed_bias']:+.1f}"
        s.add_row(safe(kind), str(row["cases"]), str(row["predicted"]), str(row["in_sample"]), *(num(p) for p in pct),
                  bias or "-", _coverage(row), num(None if row["median_half_width"] is None else 100 * row["median_half_width"]))
    console.print(s)
    if by_file:
        c = Table(title="Interval coverage per file", title_justify="left")
        for col in ("file", "kind", "with interval", "covered", "coverage", "half-width %", "calibrated on it"):
            c.add_column(col, justify="left" if col in ("file", "kind", "calibrated on it") else "right")
        for key, row in by_file.items():
            name, kind = key.rsplit(" ", 1)
            c.add_row(safe(name), safe(kind), str(row["with_interval"]), str(row["covered"]), _coverage(row),
                      num(100 * row["median_half_width"]), "yes (in-sample)" if row["interval_in_sample"] else "no")
        console.print(c)
        console.print("  [dim]coverage: the share of predictions whose measured value lies inside their 80% interval "
                      "(catalog/data/intervals.yaml). On the files the table was calibrated on it is in-sample; the "
                      "cross-validated coverage is in docs/validation.md (benchmarks/calibrate_intervals.py)[/dim]")
    if any(row["in_sample"] for row in summary.values()):
        console.print("  [dim]in-sample: the GPU's efficiency (catalog source `fitted_on`) was fitted on these runs, so "
                      "their error is not a test of the model; the out-of-sample error is the leave-one-source-out "
                      "figure of benchmarks/cross_validate.py (docs/validation.md)[/dim]")


def _coverage(row: dict) -> str:
    if not row.get("with_interval"):
        return "-"
    return f"{100 * row['coverage']:.0f}% ({row['covered']}/{row['with_interval']})"
