"""Shared terminal rendering: one console, JSON output, NO_COLOR respected by rich (the
commands import it through gpucluster.cli.render)."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from gpucluster.jsonable import finite
from gpucluster.safe_text import one_line, plain, safe

__all__ = ["console", "err_console", "num", "one_line", "plain", "print_json", "safe", "set_quiet"]


class _SafeConsole(Console):
    """A console that never lets a control character from the printed text reach the terminal.

    `safe()` at every print site is the rule; this is the net under it, for a site that forgot.
    Rich's own escapes (colours, hyperlinks, cursor moves for progress bars) are made from styles
    and control segments after this filter, so they pass; an ESC or BEL inside text does not.
    `_render_buffer` is rich's private hook: if a rich release renames it, the net is gone but
    nothing breaks (tests/cli/test_render.py notices)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(plain(seg.text, multiline=True), seg.style, seg.control)
            for seg in buffer)


# Piped output (files, CI logs) gets a wide page instead of rich's 80-column default,
# so that tables do not fold; a terminal keeps its own width.
def _piped_width() -> int | None:
    return None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160


console = _SafeConsole(highlight=False, width=_piped_width())
err_console = _SafeConsole(stderr=True, highlight=False)


def reset_consoles() -> None:
    """Make both consoles again from the current streams and environment, as at import: a console
    keeps the width, colour system and NO_COLOR it saw when made (benchmarks/fuzz_long.py's fork
    server calls this in each child, whose stdout and environment differ from its parent's)."""
    console.__init__(highlight=False, width=_piped_width())  # type: ignore[misc]
    err_console.__init__(stderr=True, highlight=False)  # type: ignore[misc]


def set_quiet(quiet: bool = True) -> None:
    """`--quiet`: nothing on the terminal but errors (JSON asked for with --json still prints,
    and files asked for with --html or --events are still written)."""
    console.quiet = err_console.quiet = quiet


def print_json(obj: Any) -> None:
    """Strict JSON: an infinite or undefined number (a break-even that never comes) is null."""
    sys.stdout.write(json.dumps(finite(obj), indent=2, default=_default, allow_nan=False) + "\n")


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
