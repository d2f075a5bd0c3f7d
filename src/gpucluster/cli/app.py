"""The `gpucluster` command. Command modules import their heavy dependencies lazily
so that `gpucluster --help` and `gpucluster catalog` start fast."""

from __future__ import annotations

import sys

import typer

from gpucluster.cli import catalog_cmd, comm_cmd, models_cmd, plan_cmd, schema_cmd, topology_cmd, validate_cmd
from gpucluster.errors import UserError

app = typer.Typer(
    name="gpucluster",
    help="Design, simulate and validate GPU clusters for AI, before and after you buy them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("catalog")(catalog_cmd.catalog)
app.command("models")(models_cmd.models)
app.command("schema")(schema_cmd.schema)
app.command("topology")(topology_cmd.topology)
app.command("comm")(comm_cmd.comm)
app.command("validate")(validate_cmd.validate)
app.add_typer(plan_cmd.plan_app, name="plan")
app.add_typer(__import__("gpucluster.cli.simulate_cmd").cli.simulate_cmd.simulate_app, name="simulate")
app.command("cost")(__import__("gpucluster.cli.cost_cmd", fromlist=["cost"]).cost)
app.command("reliability")(__import__("gpucluster.cli.reliability_cmd", fromlist=["x"]).reliability)
app.command("facility")(__import__("gpucluster.cli.facility_cmd", fromlist=["x"]).facility)
app.command("check")(__import__("gpucluster.cli.check_cmd", fromlist=["x"]).check)
app.command("advise")(__import__("gpucluster.cli.advise_cmd", fromlist=["x"]).advise)
app.add_typer(__import__("gpucluster.cli.generate_cmd", fromlist=["x"]).generate_app, name="generate")
app.add_typer(__import__("gpucluster.cli.bench_cmd", fromlist=["x"]).bench_app, name="bench")
app.command("diagnose")(__import__("gpucluster.cli.diagnose_cmd", fromlist=["x"]).diagnose)


def main() -> None:
    try:
        app()
    except UserError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
