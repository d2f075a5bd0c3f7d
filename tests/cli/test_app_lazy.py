"""The root command loads subcommands on first use: its table stays in step with the commands,
and `--help` imports none of them (nor rich, pydantic or numpy). Start-up time itself is measured
by benchmarks/cli_startup.py, never asserted here."""

import os
import subprocess
import sys

import pytest

from gpucluster.cli.app import COMMANDS, load_command


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_commands_own(name: str) -> None:
    cmd = load_command(name)
    assert cmd.name == name
    assert cmd.get_short_help_str(10**6) == COMMANDS[name][3]


def _modules_after(*argv: str) -> set[str]:
    code = ("import sys\nfrom gpucluster.cli.app import main\nsys.argv = ['gpucluster', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('\\n'.join(sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    return set(proc.stderr.split())


def test_help_imports_no_command_and_nothing_heavy() -> None:
    mods = _modules_after("--help")
    assert "gpucluster.cli.app" in mods
    heavy = {m for m in mods if m.split(".")[0] in ("numpy", "pydantic", "rich", "yaml", "markdown_it")}
    assert not heavy
    assert not {m for m in mods if m.startswith("gpucluster.cli.") and m.endswith("_cmd")}


def test_plan_train_loads_no_numpy_nor_typers_pydantic_adapters() -> None:
    if os.environ.get("GPUCLUSTER_NO_CACHE", "") not in ("", "0"):
        pytest.skip("GPUCLUSTER_NO_CACHE is set: every run reads (and imports yaml for) the catalog files")
    argv = ("plan", "train", "--model", "llama3-8b", "--gpu", "H100:8", "--top", "1")
    _modules_after(*argv)  # a fresh checkout builds its catalog cache here, from the YAML files
    mods = _modules_after(*argv)
    assert "gpucluster.plan.train_search" in mods
    assert not {m for m in mods if m.split(".")[0] in ("numpy", "yaml")}
    # Options are coerced without pydantic TypeAdapters (cli/app.py), nor the reliability and cost
    # planners that `plan train` does not print.
    assert not {"typer._adapters", "pydantic.plugin._loader", "gpucluster.plan.reliability_plan"} & mods
