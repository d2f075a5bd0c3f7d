"""`gpucluster plan`: the group, and its commands `train` and `serve` (each in its own module,
neither importing the other). Like the root group it builds only the command that runs: typer
reads each command's options from its signature, about 5 ms a command."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import typer

from gpucluster.cli.app import LazyGroup, build_command

# name -> (module, function), in the order `gpucluster plan --help` lists them.
SUBCOMMANDS = {"train": ("gpucluster.cli.plan_cmd", "train"), "serve": ("gpucluster.cli.plan_serve_cmd", "serve")}


class _PlanGroup(LazyGroup):
    def names(self) -> list[str]:
        return list(SUBCOMMANDS)

    def build(self, name: str) -> Any:
        module, attr = SUBCOMMANDS[name]
        return build_command(name, getattr(import_module(module), attr))


plan_app = typer.Typer(help="Plan a workload on a cluster: training runs and serving deployments.", no_args_is_help=True,
                       cls=_PlanGroup)
