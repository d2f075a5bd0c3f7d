"""User-facing errors.

Every problem caused by the user's input (a file, a flag, a name) is raised as
`UserError`; the CLI prints its one-line message and exits with code 2. Anything
else is a bug in gpucluster and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Bad input, reported as `file:line: field: reason` on one line."""

    def __init__(self, reason: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.field = field
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        what = f"{self.field}: " if self.field else ""
        return f"{where}{what}{self.reason}"


def unknown_name(kind: str, name: str, valid: Iterable[str], *, suggest: list[str] | None = None,
                 field: str | None = None, file: str | None = None, line: int | None = None) -> UserError:
    """An 'unknown NAME' error that suggests the closest valid names and lists them all."""
    valid = sorted(set(valid))
    close = suggest if suggest else difflib.get_close_matches(name, valid, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return UserError(f"unknown {kind} {name!r}{hint} (valid: {', '.join(valid)})",
                     field=field, file=file, line=line)
