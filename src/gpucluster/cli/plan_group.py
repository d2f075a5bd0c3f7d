"""`gpucluster plan`: the group, and its commands `train` and `serve` (each in its own module,
neither importing the other). Like the root group (cli/app.py) it builds only the command that
runs: typer reads each command's options from its signature, about 5 ms a command."""

from __future__ import annotations

from difflib import get_close_matches
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperGroup

# name -> (module, function), in the order `gpucluster plan --help` lists them.
SUBCOMMANDS = {"train": ("gpucluster.cli.plan_cmd", "train"), "serve": ("gpucluster.cli.plan_serve_cmd", "serve")}


class _PlanGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in SUBCOMMANDS:
            from gpucluster.cli.app import build_command

            module, attr = SUBCOMMANDS[cmd_name]
            self.commands[cmd_name] = build_command(cmd_name, getattr(import_module(module), attr))
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:
            # typer suggests from the commands built so far: these are built on first use.
            message = getattr(exc, "message", None)
            if isinstance(message, str) and args and "Did you mean" not in message:
                matches = get_close_matches(args[0], list(SUBCOMMANDS))
                if matches:
                    exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"  # type: ignore[attr-defined]
            raise


plan_app = typer.Typer(help="Plan a workload on a cluster: training runs and serving deployments.", no_args_is_help=True,
                       cls=_PlanGroup)
