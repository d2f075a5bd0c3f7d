"""Shared terminal rendering: one console, JSON output, NO_COLOR respected by rich."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from rich.console import Console

# Piped output (files, CI logs) gets a wide page instead of rich's 80-column default,
# so that tables do not fold; a terminal keeps its own width.
_width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
console = Console(highlight=False, width=_width)
err_console = Console(stderr=True, highlight=False)


def set_quiet(quiet: bool = True) -> None:
    """`--quiet`: nothing on the terminal but errors (JSON asked for with --json still prints,
    and files asked for with --html or --events are still written)."""
    console.quiet = err_console.quiet = quiet


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=_default, allow_nan=False) + "\n")


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "isoformat"):
        return o.isoformat()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"
