"""`gpucluster topology`: what the fabric of a cluster spec delivers, tier by tier."""

from __future__ import annotations

from typing import Annotated

import typer


def topology(
    cluster: Annotated[str, typer.Option(help="Cluster spec YAML")],
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Per-GPU bandwidth and latency per tier, switches and cables, bisection bandwidth."""
    raise NotImplementedError
