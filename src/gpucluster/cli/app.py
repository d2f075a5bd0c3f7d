"""The `gpucluster` command. Subcommands load on first use: `gpucluster --help` lists them from
the table below without importing one, and `gpucluster plan train` imports only the plan
commands. Command modules import their heavy dependencies lazily too, and help is click's plain
layout (no rich or markdown rendering at start), so that every command starts fast
(benchmarks/cli_startup.py)."""

from __future__ import annotations

import os
import sys
from difflib import get_close_matches
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperGroup

from gpucluster.errors import UserError

# name -> (module, attribute, is a group of subcommands, the one-line summary `--help` lists).
# The summary is the command's own first docstring line; tests/cli/test_app_lazy.py holds them equal.
COMMANDS: dict[str, tuple[str, str, bool, str]] = {
    "init": ("gpucluster.cli.init_cmd", "init", False,
             "Write a cluster spec YAML from --gpu, --nodes, --nic and --nics-per-node, for every other command."),
    "catalog": ("gpucluster.cli.catalog_cmd", "catalog", False,
                "List GPUs, NICs, switches, CPUs and link technologies, or show one entry with sources."),
    "models": ("gpucluster.cli.models_cmd", "models", False,
               "List transformer presets (size, shape, MoE, source), or show one."),
    "schema": ("gpucluster.cli.schema_cmd", "schema", False,
               "Print the JSON Schema of a spec file (point your editor's YAML plugin at it)."),
    "topology": ("gpucluster.cli.topology_cmd", "topology", False,
                 "Per-GPU bandwidth and latency per tier, switches and cables, bisection bandwidth."),
    "comm": ("gpucluster.cli.comm_cmd", "comm", False,
             'Print the nccl-tests table that a healthy cluster should give: the "expected" side of '
             '"run nccl-tests before you train".'),
    "validate": ("gpucluster.cli.validate_cmd", "validate", False,
                 "Predict each case's measured metric and print the error (predicted - measured) / measured."),
    "cost": ("gpucluster.cli.cost_cmd", "cost", False,
             "What the cluster costs to build and run, against renting it; break-even month and TCO."),
    "reliability": ("gpucluster.cli.reliability_cmd", "reliability", False,
                    "How often a job fails at its size, how often to checkpoint, and what failures cost."),
    "facility": ("gpucluster.cli.facility_cmd", "facility", False,
                 "kW per node and per rack, amperes and circuits on the feed, air or liquid cooling; with "
                 "--model, what storage must deliver to feed the GPUs and absorb checkpoints, tier by tier."),
    "check": ("gpucluster.cli.check_cmd", "check", False,
              "Find what is wrong with a cluster spec and its job files, with the numbers and the fix."),
    "advise": ("gpucluster.cli.advise_cmd", "advise", False,
               "Answer the seeds' decision framework for your workload from the planners and the cost model."),
    "diagnose": ("gpucluster.cli.diagnose_cmd", "diagnose", False,
                 "Name the tier that delivers less than the spec promises, with the numbers."),
    "sweep": ("gpucluster.cli.sweep_cmd", "sweep", False,
              "Run every combination of the grid; a failed task is reported with its parameters and the rest "
              "complete (exit 1 when any failed)."),
    "metrics": ("gpucluster.cli.metrics_cmd", "metrics", False,
                "Convert a result to Prometheus/OpenMetrics text with base-unit metric names."),
    "plan": ("gpucluster.cli.plan_group", "plan_app", True,
             "Plan a workload on a cluster: training runs and serving deployments."),
    "simulate": ("gpucluster.cli.simulate_cmd", "simulate_app", True,
                 "Simulate a shared GPU cluster over days or months: queues, utilisation, failures, policies."),
    "generate": ("gpucluster.cli.generate_cmd", "generate_app", True,
                 "Write sbatch, torchrun, DeepSpeed, Kubernetes and Kueue files from a plan."),
    "bench": ("gpucluster.cli.bench_cmd", "bench_app", True,
              "Benchmarks: collectives (nccl-tests table), GEMM, HBM, storage."),
    "slurm": ("gpucluster.cli.slurm_cmd", "slurm_app", True, "Submit to Slurm, follow jobs, import sacct history."),
}


def load_command(name: str) -> Any:
    """The click command (or group) of one subcommand, built by typer from its module."""
    module, attr, group, _ = COMMANDS[name]
    return build_command(name, getattr(import_module(module), attr), group)


def build_command(name: str, obj: Any, group: bool = False) -> Any:
    """The click command typer builds from a function (or the group from a typer.Typer)."""
    one = typer.Typer(rich_markup_mode=None)
    if group:
        one.add_typer(obj, name=name)
    else:
        one.command(name)(obj)
    one.command("_")(lambda: None)  # two commands: typer builds a group, not a lone command
    command = typer.main.get_group(one).commands[name]
    _plain_coercion(command)
    return command


class _PlainCoercion:
    """Coerces a str, int, float or bool option without pydantic, or hands the value to typer's own.

    typer (0.2x) coerces every option through a pydantic TypeAdapter built on first use, given or
    not: pydantic's schema machinery and its plugin look-up (importlib.metadata) cost about 0.1 s
    of a `plan train` run. The values answered here are the ones that adapter returns unchanged or
    as int(text); anything else (a bad number, "1_000", " 3") goes to it, errors and all."""

    __slots__ = ("_annotation", "_param")

    def __init__(self, param: Any, annotation: type) -> None:
        self._param, self._annotation = param, annotation

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        kind = type(value)
        if value is None or kind is self._annotation:
            return value
        if self._annotation is int and kind is str:
            digits = value[1:] if value[:1] == "-" else value
            if digits.isascii() and digits.isdigit():  # -?[0-9]+: int() reads it as pydantic does
                if len(digits) > 100:   # int() raises ValueError past 4,300 digits; no option takes 10^100
                    raise typer.BadParameter(f"at most 100 digits, got {len(digits):,}", ctx=ctx, param=param)
                return int(value)
        from typer._coercion import build_runtime_param

        self._param._runtime_param = build_runtime_param(self._param.type_descriptor)
        return self._param._runtime_param.coerce(value, param=param, ctx=ctx)


def _plain_coercion(command: Any) -> None:
    """Give the single-valued str/int/float/bool options of the command, its subcommands and their
    --help (made on first parse) _PlainCoercion. A typer without these internals keeps its own."""
    for sub in getattr(command, "commands", {}).values():
        _plain_coercion(sub)
    for param in command.params:
        _plain_param(param)
    make_help = getattr(command, "get_help_option", None)
    if make_help is None or getattr(make_help, "plain", False):
        return

    def get_help_option(ctx: Any) -> Any:
        option = make_help(ctx)
        if option is not None:
            _plain_param(option)
        return option

    get_help_option.plain = True  # type: ignore[attr-defined]
    command.get_help_option = get_help_option


def _plain_param(param: Any) -> None:
    desc = getattr(param, "type_descriptor", None)
    info = getattr(desc, "parameter_info", None)
    if (desc is None or info is None or getattr(param, "_runtime_param", False) is not None
            or desc.annotation not in (str, int, float, bool) or desc.file_annotation is not None
            or param.multiple or param.nargs != 1 or info.parser is not None
            or info.min is not None or info.max is not None or desc.is_choice or desc.is_path):
        return
    param._runtime_param = _PlainCoercion(param, desc.annotation)


class LazyGroup(TyperGroup):
    """A group that lists its commands by name and builds one only when it runs (or help lists
    them): `names()` and `build(name)` say which there are and how one is made."""

    def names(self) -> list[str]:
        raise NotImplementedError

    def build(self, name: str) -> Any:
        raise NotImplementedError

    def list_commands(self, ctx: Any) -> list[str]:
        return self.names()

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.names():
            self.commands[cmd_name] = self.build(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:
            # typer suggests from the commands built so far; these are built on first use.
            message = getattr(exc, "message", None)
            if isinstance(message, str) and args and "Did you mean" not in message:
                matches = get_close_matches(args[0], self.names())
                if matches:
                    exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"  # type: ignore[attr-defined]
            raise


class _LazyGroup(LazyGroup):
    """The root group: lists COMMANDS without importing them; imports one when it runs."""

    def names(self) -> list[str]:
        return list(COMMANDS)

    def build(self, name: str) -> Any:
        return load_command(name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[3]) for name, entry in COMMANDS.items()])

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _plain_coercion(self)
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="gpucluster",
    help="Design, simulate and validate GPU clusters for AI, before and after you buy them.",
    cls=_LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)


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


MAX_QUOTED = 200       # characters of one quoted input value in an error line
MAX_LINE = 600         # characters of the whole line: its start (file, field) and its end (the reason) kept


def clip(message: str) -> str:
    """An error line that quotes the user's input at most ~200 characters at a time (a 100 kB value
    was printed whole): every quoted run longer than that is cut, then the line's middle if it is
    still too long."""
    import re

    def cut(m: re.Match) -> str:
        text = m.group(0)
        return text[:MAX_QUOTED] + f"...{text[0]} ({len(text):,} characters)"
    n = MAX_QUOTED
    message = re.sub(rf"'[^'\n]{{{n},}}'|\"[^\"\n]{{{n},}}\"", cut, message)
    if len(message) > MAX_LINE:
        message = message[:350] + f" [... {len(message) - 550:,} characters ...] " + message[-200:]
    return message


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
    from gpucluster.cli.safe_text import one_line

    args, quiet = _global_flags(sys.argv[1:])
    if quiet or "gpucluster.report.terminal" in sys.modules:  # rich loads with the first command that prints
        from gpucluster.report.terminal import set_quiet
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
        print(f"error: {clip(one_line(exc.message))}", file=sys.stderr)
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
                print(clip(one_line(_usage_error(exc))), file=sys.stderr)
            sys.exit(2)
        raise
    sys.exit(code if isinstance(code, int) else 0)
