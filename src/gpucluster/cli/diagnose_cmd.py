"""`gpucluster diagnose`: measured collective results against what the cluster spec should give."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def diagnose(
    results: Annotated[list[str], typer.Argument(help="Results of `gpucluster bench collective --json`")],
    cluster: Annotated[str, typer.Option(help="Cluster spec YAML the results were measured on")],
    pool: Annotated[Optional[str], typer.Option(help="Node pool (default: the first)")] = None,
    threshold: Annotated[float, typer.Option(help="A tier below this fraction of the spec is a bottleneck")] = 0.7,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Name the tier that delivers less than the spec promises, with the numbers. Exit 1 when one does."""
    import json

    from gpucluster.bench.diagnose import diagnose as run
    from gpucluster.cli.render import console, print_json, safe
    from gpucluster.errors import UserError
    from gpucluster.specs.loader import read_text

    if not 0 < threshold <= 1:
        raise UserError(f"must be in (0, 1], got {threshold}", field="--threshold")
    loaded = []
    for path in results:
        try:
            loaded.append((path, json.loads(read_text(path))))
        except json.JSONDecodeError as exc:
            raise UserError(f"not JSON ({exc.msg})", file=path, line=exc.lineno) from None
    findings = run(cluster, loaded, pool, threshold)
    bad = [f for f in findings if f.bottleneck]
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("diagnose", {"schema": "gpucluster-diagnose/v1", "cluster": cluster, "threshold": threshold,
                    "tiers": [f.to_json() for f in findings],
                    "bottleneck": bad[0].to_json() if bad else None}))
    else:
        escape = safe          # sentences quote the result files and the spec: markup and control bytes
        for f in findings:
            style = "bold red" if f.bottleneck else "green" if f.judged else "yellow"
            label = "BOTTLENECK" if f.bottleneck else "ok" if f.judged else "not judged"
            console.print(f"[{style}]{label:10}[/] {escape(f.sentence())}")
            console.print(f"           [dim]{escape(f.source)}: {escape(f.op)}, {f.ranks} ranks on {f.nodes} node(s); sizes "
                          f"{escape(', '.join(str(s) for s in f.sizes))} B; measured "
                          f"{', '.join(f'{m:.3g}' for m in f.measured_gbps)} GB/s, expected "
                          f"{', '.join(f'{e:.3g}' for e in f.expected_gbps)}"
                          + (f", same-run host baseline {', '.join(f'{b:.3g}' for b in f.baseline_gbps)}"
                             if f.baseline_gbps else "") + "[/dim]")
            for n in f.notes:
                console.print(f"           [yellow]{escape(n)}[/]")
        if not bad:
            console.print("no tier below the threshold: the fabric delivers what the spec gives")
    if html:
        from gpucluster.report.ops_report import write_diagnose_report
        write_diagnose_report(cluster, threshold, findings, html)
    if bad:
        raise typer.Exit(1)
