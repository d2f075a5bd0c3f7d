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

    if out:
        from gpucluster.output_file import check_output_path
        check_output_path(out, "--out")
    try:
        doc = json.loads(read_text(result))
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON ({exc.msg})", file=result, line=exc.lineno) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == "gpucluster-bench-collective/v1":
        from gpucluster.bench.result import read_collective
        res = read_collective(doc, result)      # every field checked: a bad one is named, never a traceback
        _label(doc.get("backend", ""), "backend", result)
        # From the checked values, not the raw document: pydantic reads "8" as 8.0 (fuzz case 12822:
        # a time_us of "8" reached the exporter as text, TypeError).
        fams = collective_families(res.model_dump(mode="json", by_alias=True))
    elif schema == "gpucluster-simulation/v1":
        _check_simulation(doc, result)          # every value exported: a finite number in range
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
        write_textfile(out, fams, openmetrics=openmetrics, field="--out")
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
    _label(v, key, source)      # it becomes a label value: no control characters (fuzz case 48734)
    return v


def _check_simulation(doc: dict, source: str) -> None:
    """The fields of a `simulate run --json` summary that become samples: ratios in 0..1, hours,
    counts, waits and costs finite and >= 0 (or null where the summary may have none), names
    text without control characters. A hand-edited NaN or -5 is named, never exported."""
    import math

    from gpucluster.errors import UserError

    def number(v: object, field: str, hi: float = math.inf, null: bool = False, count: bool = False) -> None:
        if v is None and null:
            return
        if count and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise UserError(f"must be a whole number >= 0 (a count of jobs), got {v!r}"[:200], file=source, field=field)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= hi:
            rng = "0 to 1" if hi == 1 else ">= 0"
            raise UserError(f"must be a finite number {rng}{' or null' if null else ''}, got {v!r}"[:200],
                            file=source, field=field)

    def mapping(v: object, field: str) -> dict:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise UserError(f"must be a mapping, got {type(v).__name__}", file=source, field=field)
        return v

    def name(v: object, field: str) -> None:
        _label(v, field, source)

    for key in ("scenario", "policy"):
        if key in doc:
            name(doc[key], key)
    util = mapping(doc.get("utilization"), "utilization")
    for k in ("allocation", "busy"):
        if k in util:
            number(util[k], f"utilization.{k}", hi=1)
    for k, v in mapping(doc.get("gpu_hours"), "gpu_hours").items():
        name(k, "gpu_hours")
        number(v, f"gpu_hours.{k}")
    for k, v in mapping(doc.get("jobs"), "jobs").items():
        if k == "not_run":                      # the one breakdown (why, by reason): checked, not exported
            for why, n in mapping(v, "jobs.not_run").items():
                name(why, "jobs.not_run")
                number(n, f"jobs.not_run.{why}", count=True)
            continue
        name(k, "jobs")
        number(v, f"jobs.{k}", count=True)
    if "goodput" in doc:
        number(doc["goodput"], "goodput", hi=1, null=True)
    for cls, c in mapping(doc.get("classes"), "classes").items():
        name(cls, "classes")
        for key in ("wait_s", "jct_s"):
            for q, v in mapping(mapping(c, f"classes.{cls}").get(key), f"classes.{cls}.{key}").items():
                name(q, f"classes.{cls}.{key}")
                number(v, f"classes.{cls}.{key}.{q}", null=True)
    cost = mapping(doc.get("cost"), "cost")
    for k in ("on_prem_usd", "cloud_usd"):
        if k in cost:
            number(cost[k], f"cost.{k}", null=True)


def _label(v: object, field: str, source: str) -> None:
    """A label value: text without control characters (an ESC would reach the terminal that
    prints the metrics), at most 1,024 characters."""
    import re

    from gpucluster.errors import UserError

    if not isinstance(v, str) or re.search(r"[\x00-\x1f\x7f-\x9f]", v) or len(v) > 1024:
        raise UserError("must be text without control characters, at most 1,024 characters", file=source,
                        field=field)
