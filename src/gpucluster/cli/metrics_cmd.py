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
        from gpucluster.bench.result import read_collective
        read_collective(doc, result)            # every field checked: a bad one is named, never a traceback
        fams = collective_families(doc)
    elif schema == "gpucluster-simulation/v1":
        try:
            fams = simulation_families(doc)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"malformed simulation summary ({type(exc).__name__}: {exc})", file=result) from None
    elif schema == "gpucluster-bench-storage/v1":
        fams = [Family("gpucluster_storage_throughput_bytes_per_second", "gauge",
                       "Sequential throughput (write includes fsync)", "bytes_per_second")
                .add(_gbps(doc, "write_gbps", result) * 1e9, path=_text(doc, "path", result), direction="write")
                .add(_gbps(doc, "read_gbps", result) * 1e9, path=_text(doc, "path", result), direction="read")]
    else:
        raise UserError(f"no metrics for schema {schema!r} (bench collective, bench storage or simulate run JSON)",
                        file=result)
    if out:
        try:
            write_textfile(out, fams, openmetrics=openmetrics)
        except OSError as exc:
            raise UserError(f"cannot write: {exc.strerror or exc}", file=out) from None
    else:
        typer.echo(render(fams, openmetrics=openmetrics), nl=False)


def _gbps(doc: dict, key: str, source: str) -> float:
    import math

    from gpucluster.errors import UserError

    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise UserError(f"must be a finite number >= 0, got {v!r}"[:200], file=source, field=key)
    return float(v)


def _text(doc: dict, key: str, source: str) -> str:
    from gpucluster.errors import UserError

    v = doc.get(key)
    if not isinstance(v, str):
        raise UserError(f"must be text, got {type(v).__name__}", file=source, field=key)
    return v
