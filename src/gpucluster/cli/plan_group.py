"""`gpucluster plan`: the group, and its commands `train` and `serve` (each in its own module,
neither importing the other)."""

from __future__ import annotations

import typer

from gpucluster.cli.plan_cmd import train
from gpucluster.cli.plan_serve_cmd import serve

plan_app = typer.Typer(help="Plan a workload on a cluster: training runs and serving deployments.", no_args_is_help=True)
plan_app.command("train")(train)
plan_app.command("serve")(serve)
