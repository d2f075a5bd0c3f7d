"""Text from users and files, made safe to print on a terminal.

Cluster, pool, model and scenario names, trace headers, job-file lines and paths are written by
whoever wrote the file. Printed raw through rich they are parsed as markup: `lab [/x]` crashes
with a MarkupError, `lab [estimate]` loses its bracket, `[link=...]` becomes a hyperlink. Printed
raw anywhere, an ESC or BEL byte reaches the terminal (`\\x1b]0;TITLE\\x07` retitles the window,
other sequences move the cursor or hide text). So every such string goes through `safe()` (rich
markup) or `plain()` (plain print) before it is printed: control characters become visible
`\\xNN` escapes, and markup is escaped so that rich prints the brackets literally.

This module imports nothing heavy: the HTML reports and the error path can use it too.
"""

from __future__ import annotations

from typing import Any

# C0 controls, DEL and C1 controls (0x80-0x9f: 0x9b is a one-byte CSI on some terminals), and the
# bidirectional overrides that reorder what is shown ("Trojan Source", CVE-2021-42574).
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)


def _visible(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ONE_LINE = {c: _visible(c) for c in _CONTROLS}
# Multi-line text (a job file, a rendered table) keeps its newlines and tabs.
_MULTI_LINE = {c: v for c, v in _ONE_LINE.items() if c not in (0x09, 0x0A)}


def plain(text: Any, *, multiline: bool = False) -> str:
    """`text` as a string with every control character shown as `\\xNN` (newlines too, unless
    `multiline`): safe for print() and typer.echo, not for rich markup (see `safe`)."""
    return str(text).translate(_MULTI_LINE if multiline else _ONE_LINE)


def safe(text: Any, *, multiline: bool = False) -> str:
    """`text` for a rich markup string or table cell: control characters made visible and markup
    escaped, so that rich prints exactly the characters given, brackets included."""
    from rich.markup import escape

    return escape(plain(text, multiline=multiline))


def one_line(text: Any) -> str:
    """An error message as one terminal line: line breaks become spaces, other controls visible.
    (A YAML reader error, for one, spans two lines; exit 2 promises one.)"""
    return plain(" ".join(str(text).splitlines()))
