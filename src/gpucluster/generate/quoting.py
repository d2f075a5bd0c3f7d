"""Safe spelling of user strings in each target language."""

from __future__ import annotations

import re
import shlex

from gpucluster.errors import UserError

# Refused in every value written into a script or config: C0 and C1 controls (NEL, U+0085, ends a
# line for some readers), the line and paragraph separators, and the invisible format characters
# that reorder or hide text in an editor or a review (Trojan Source, CVE-2021-42574): the bidi
# embeddings, overrides and isolates, the zero-width characters, marks and the BOM.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def check_text(value: str, field: str) -> str:
    """User strings may hold any printable character, never a newline or control character
    (which would end a directive or comment line)."""
    if not value:
        raise UserError("must not be empty", field=field)
    if _CONTROL.search(value):
        bad = _CONTROL.search(value).group()   # type: ignore[union-attr]
        raise UserError(f"must not contain newlines, control or invisible format characters (found U+{ord(bad):04X}): "
                        f"{value[:60]!r}{'...' if len(value) > 60 else ''}", field=field)
    return value


def sh(value: str) -> str:
    """One shell word, whatever the value holds."""
    return shlex.quote(value)


class Expand(str):
    """A word the generator itself builds around shell variables (`--nnodes=$SLURM_NNODES`):
    double-quoted so that the variables expand. Never built from user text."""


_VAR = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*$")


def is_variable(value: str) -> bool:
    return bool(_VAR.match(value))


def sh_join(words: list[str]) -> str:
    return " ".join(f'"{w}"' if isinstance(w, Expand) else sh(w) for w in words)


_PLAIN = re.compile(r"^[A-Za-z0-9._:/=+,@%-]+$")


def slurm_directive(value: str) -> str:
    """A #SBATCH argument. sbatch (src/sbatch/opt.c `_get_argument`, Slurm 22.05) ends an
    argument at a blank unless inside quotes (a backslash does not protect a blank), drops the
    quotes, and inside them takes a backslash as escaping the next character; so: double quotes
    around the value, with backslash and double quote escaped. A control character would end
    the directive line and start a shell line: refused, whatever the caller checked before."""
    if _CONTROL.search(value):
        raise UserError(f"must not contain newlines, control or invisible format characters: {value[:40]!r}",
                        field="#SBATCH value")
    if _PLAIN.match(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def comment(value: str) -> str:
    """Text for a `#` comment line: one line (check_text refuses newlines)."""
    return _CONTROL.sub("?", value)


def k8s_name(value: str, limit: int = 63) -> str:
    """An RFC 1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric."""
    s = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    s = re.sub(r"-{2,}", "-", s)[:limit].strip("-")
    return s or "job"
