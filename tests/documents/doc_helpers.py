"""Run a command in-process (typer's CliRunner) and read its --json document."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> Any:
    from gpucluster.cli.app import app

    old = Path.cwd()
    os.chdir(ROOT)          # the examples are named relative to the repository
    try:
        res = CliRunner().invoke(app, list(args), catch_exceptions=False, env={"NO_COLOR": "1"})
    finally:
        os.chdir(old)
    return res


def json_of(*args: str) -> dict[str, Any]:
    res = invoke(*args, "--json")
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)
