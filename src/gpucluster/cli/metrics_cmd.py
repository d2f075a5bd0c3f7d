"""`gpucluster metrics RESULT.json`: a benchmark or simulation result as OpenMetrics text, for
node-exporter's textfile collector (or any Prometheus scraper)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def metrics(result: Annotated[str, typer.Argument(help="JSON of bench collective/storage or simulate run")],
            out: Annotated[Optional[str], typer.Option("--out", "-o", help="Write here atomically (a .prom file)")] = None,
            openmetrics: Annotated[bool, typer.Option(help="OpenMetrics flavour (# UNIT, # EOF)")] = False) -> None:
    """Convert a result to Prometheus/OpenMetrics text with base-unit metric names."""
    import json

    from gpucluster.engines.openmetrics import (Family, collective_families, render, simulation_families,
                                                write_textfile)
    from gpucluster.errors import UserError
    from gpucluster.specs.loader import read_text

    try:
        doc = json.loads(read_text(result))
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON ({exc.msg})", file=result, line=exc.lineno) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == "gpucluster-bench-collective/v1":
        fams = collective_families(doc)
    elif schema == "gpucluster-simulation/v1":
        fams = simulation_families(doc)
    elif schema == "gpucluster-bench-storage/v1":
        fams = [Family("gpucluster_storage_throughput_bytes_per_second", "gauge",
                       "Sequential throughput (write includes fsync)", "bytes_per_second")
                .add(doc["write_gbps"] * 1e9, path=doc["path"], direction="write")
                .add(doc["read_gbps"] * 1e9, path=doc["path"], direction="read")]
    else:
        raise UserError(f"no metrics for schema {schema!r} (bench collective, bench storage or simulate run JSON)",
                        file=result)
    if out:
        write_textfile(out, fams)
    else:
        typer.echo(render(fams, openmetrics=openmetrics), nl=False)
