"""The `gpucluster` command. Command modules import their heavy dependencies lazily
so that `gpucluster --help` and `gpucluster catalog` start fast."""

from __future__ import annotations

import os
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
app.add_typer(__import__("gpucluster.cli.slurm_cmd", fromlist=["x"]).slurm_app, name="slurm")
app.command("sweep")(__import__("gpucluster.cli.sweep_cmd", fromlist=["x"]).sweep)
app.command("metrics")(__import__("gpucluster.cli.metrics_cmd", fromlist=["x"]).metrics)


def _global_flags(argv: list[str]) -> tuple[list[str], bool]:
    """`--quiet` (or `-q`) anywhere before a lone `--`, for every command: taken out of the line."""
    out, quiet = [], False
    for i, arg in enumerate(argv):
        if arg == "--":
            out += argv[i:]
            break
        if arg in ("--quiet", "-q"):
            quiet = True
            continue
        out.append(arg)
    return out, quiet


def _usage_error(exc: Exception) -> str:
    """A command-line mistake (unknown option, missing value) as one line with where to look."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "gpucluster"
    text = "; ".join(line.strip() for line in exc.format_message().splitlines() if line.strip())  # type: ignore[attr-defined]
    return f"error: {text} (see `{where} --help`)"


@app.callback()
def _root(quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors (on any command, "
                                                                   "anywhere on the line)")) -> None:
    """Design, simulate and validate GPU clusters for AI, before and after you buy them."""


def main() -> None:
    from gpucluster.cli.render import set_quiet
    from gpucluster.cli.safe_text import one_line

    args, quiet = _global_flags(sys.argv[1:])
    set_quiet(quiet)
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        # Piped or redirected (a pager, a file, CI): rich would lay help and tables out in 80
        # columns and cut option names and help text with an ellipsis.
        os.environ["COLUMNS"] = "160"
    try:
        code = app(args=args, prog_name="gpucluster", standalone_mode=False)
    except UserError as exc:
        # The message quotes the user's input (names, values, YAML reader text): one line, no
        # control bytes, whatever it holds.
        print(f"error: {one_line(exc.message)}", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, EOFError):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        if type(exc).__name__ == "Abort":
            print("interrupted", file=sys.stderr)
            sys.exit(130)
        if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
            if exc.format_message().strip():          # empty: no arguments, the help was printed
                print(one_line(_usage_error(exc)), file=sys.stderr)
            sys.exit(2)
        raise
    sys.exit(code if isinstance(code, int) else 0)
