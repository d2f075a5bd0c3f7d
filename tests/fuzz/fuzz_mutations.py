"""How a fuzz case is made: the sources of choices (seeded random or hypothesis), the hostile
values, and the mutations of a document (structural) or of its text (bytes)."""

from __future__ import annotations

import copy
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml


T = TypeVar("T")


class Source(Protocol):
    """Where choices come from: hypothesis (shrinkable) or random.Random (the long run)."""

    def pick(self, options: Sequence[T]) -> T: ...

    def integer(self, lo: int, hi: int) -> int: ...


class RandomSource:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DataSource:
    """hypothesis's `data` object behind the Source protocol."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def pick(self, options: Sequence[T]) -> T:
        return options[self.data.draw(self.st.integers(0, len(options) - 1))]

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# Sentinels: if the output ever holds the left side joined without its brackets, rich ate markup.
MARKUP_PROBES = {"Q1[bold]Q2": "Q1Q2", "Q3[/x]Q4": "Q3Q4", "Q5[estimate]Q6": "Q5Q6",
                 "[link=file:///etc/passwd]Q7[/link]Q8": "Q7Q8", "Q9[/]Q0": "Q9Q0"}
HOSTILE_STRINGS: list[str] = [
    *MARKUP_PROBES, "lab [/x]", "lab cluster [estimate]", "pool[a]", "a\\", "[", "]", "[/]", "[bold",
    "\x1b]0;TITLE\x07", "\x1b[2J\x1b[Hcleared", "x\x1b[31mred", "bell\x07", "\x9b31m", "\u202eevil.txt",
    "tab\there", "new\nline", "cr\rreturn", "nul\x00byte", "", " ", "é☃𝔘", "a" * 5000, "-1", "nan", "1e999",  # noqa: RUF001  (hostile on purpose)
    "${HOME}", "$(id)", "'; rm -rf /", "%s%n", "{0}", "<script>x</script>", "H100:8", "null", "~",
]
HOSTILE_NUMBERS: list[Any] = [0, -1, -8, 1, 2**31, 2**63, 10**30, 1e308, -1e308, math.inf, -math.inf, math.nan,
                              1e-300, 0.5, -0.0, True, False, None]
WRONG_TYPES: list[Any] = ["8", "abc", [], {}, [1, 2], {"a": 1}, [[[[[]]]]], "1" * 4400]


@dataclass
class Case:
    """One run: files to write (name -> bytes) and argv, in which `{dir}` is the case's folder."""
    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    note: str = ""
    refuse: bool = False          # the case holds a value known to be invalid: exit 0 is a wrong accept
    fifos: list[str] = field(default_factory=list)       # named pipes to make (no writer ever opens them)
    env: dict[str, str] = field(default_factory=dict)    # added to the environment ({dir}: the case folder)
    links: dict[str, str] = field(default_factory=dict)  # symbolic links to make: name -> target
    executables: list[str] = field(default_factory=list)  # files to mark executable (stub programs)
    call: dict[str, Any] | None = None   # a Python API call instead of a command line (fuzz_api_cases.run_call)
    expect: str | None = None    # the run must end in a one-line error holding this text (the option refused)

    def args(self, folder: Path) -> list[str]:
        return [a.replace("{dir}", str(folder)) for a in self.argv]

    def environment(self, folder: Path) -> dict[str, str]:
        return {k: v.replace("{dir}", str(folder)) for k, v in self.env.items()}

    def write(self, folder: Path) -> None:
        for name, data in self.files.items():
            path = folder / name                  # "in[/x].yaml" is the file x].yaml in a folder in[
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.replace(b"{dir}", str(folder).encode()))
        for name in self.fifos:
            os.mkfifo(folder / name)
        for name, target in self.links.items():
            os.symlink(target.replace("{dir}", str(folder)), folder / name)
        for name in self.executables:
            os.chmod(folder / name, 0o755)


# --- structured mutations ---------------------------------------------------------------------

def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into the document, containers and leaves."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths(v, (*prefix, i))
    return out


def set_at(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return data


@dataclass
class Mutation:
    """What the last mutate_data call did: the oracle's wrong-accept rules read it."""
    op: str = ""
    where: tuple = ()
    value: Any = None


LAST = Mutation()


def mutate_data(src: Source, data: Any, name_keys: Sequence[tuple] = (),
                focus: Sequence[tuple] = ()) -> tuple[Any, str]:
    """One structural change: a hostile value at a random place, a name made hostile, a key
    removed or added, a subtree nested deep or repeated. `focus`: paths worth hitting more often
    (the fields a reader uses), picked half the time when they exist. LAST records the change."""
    data = copy.deepcopy(data)
    data, note = _mutate(src, data, name_keys, focus)
    return data, note


COIN = (True, False)    # a fair coin for Source.pick


def _mutate(src: Source, data: Any, name_keys: Sequence[tuple], focus: Sequence[tuple]) -> tuple[Any, str]:
    op = src.pick(["number", "string", "type", "name", "name", "delete", "unknown", "nest", "repeat"])
    all_paths = paths(data)
    present = [f for f in focus if f in all_paths]
    where = src.pick(present) if present and bool(src.pick(COIN)) else src.pick(all_paths)
    LAST.op, LAST.where, LAST.value = op, where, None
    if op == "name" and name_keys:
        path = src.pick(list(name_keys))
        try:
            value = src.pick(HOSTILE_STRINGS)
            LAST.op, LAST.where, LAST.value = "string", path, value
            return set_at(data, path, value), f"name {path}"
        except (KeyError, IndexError, TypeError):
            op = "string"
    mutated = _mutation_value(src, op, where, data)
    return mutated
    if op == "name" and name_keys:
        path = src.pick(list(name_keys))
        try:
            return set_at(data, path, src.pick(HOSTILE_STRINGS)), f"name {path}"
        except (KeyError, IndexError, TypeError):
            op = "string"


def _set(data: Any, where: tuple, op: str, value: Any) -> Any:
    LAST.op, LAST.where, LAST.value = op, where, value
    return set_at(data, where, value)


def _mutation_value(src: Source, op: str, where: tuple, data: Any) -> tuple[Any, str]:
    if op in ("number", "name"):
        return _set(data, where, "number", src.pick(HOSTILE_NUMBERS)), f"number at {where}"
    if op == "string":
        return _set(data, where, "string", src.pick(HOSTILE_STRINGS)), f"string at {where}"
    if op == "type":
        return _set(data, where, "type", src.pick(WRONG_TYPES)), f"type at {where}"
    if op == "delete" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        del parent[where[-1]]
        LAST.op, LAST.where = "delete", where
        return data, f"delete {where}"
    if op == "unknown":
        target = data
        for p in where:
            target = target[p]
        if isinstance(target, dict):
            target[src.pick(HOSTILE_STRINGS[:12] + ["colour"])] = src.pick(HOSTILE_NUMBERS)
            LAST.op = "unknown"
            return data, f"unknown key at {where}"
    if op == "nest":
        value: Any = 1
        for _ in range(src.integer(10, 200)):
            value = [value]
        return _set(data, where, "nest", value), f"nested at {where}"
    if op == "repeat" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        if isinstance(parent, list):
            parent.extend([parent[where[-1]]] * src.integer(2, 300))
            LAST.op = "repeat"
            return data, f"repeated {where}"
    return _set(data, where, "number", src.pick(HOSTILE_NUMBERS)), f"number at {where}"


def to_yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6).encode("utf-8", "surrogatepass")


# --- text mutations ---------------------------------------------------------------------------

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)))


def mutate_text(src: Source, text: str) -> tuple[bytes, str]:
    """One change to the bytes of a file: cut, binary bytes, NUL, BOM, empty, an alias bomb or a
    recursive alias, a key written twice, a very long line, CRLF line ends."""
    lines = text.splitlines(keepends=True) or [""]
    op = src.pick(["truncate", "binary", "nul", "empty", "bom", "bomb", "recursive", "duplicate",
                   "long", "crlf", "invalid-utf8", "swap"])
    raw = text.encode()
    if op == "truncate":
        return raw[:src.integer(0, max(0, len(raw) - 1))], op
    if op == "binary":
        at = src.integer(0, len(raw))
        return raw[:at] + bytes(src.integer(0, 255) for _ in range(16)) + raw[at:], op
    if op == "nul":
        at = src.integer(0, len(raw))
        return raw[:at] + b"\x00" + raw[at:], op
    if op == "empty":
        return src.pick([b"", b"\n", b"   \n", b"---\n", b"null\n", b"[]\n", b"{}\n", b"42\n"]), op
    if op == "bom":
        return b"\xef\xbb\xbf" + raw, op
    if op == "bomb":
        return (BOMB + text).encode(), op
    if op == "recursive":
        return (text + "\nzz: &r [*r]\n").encode(), op
    if op == "duplicate":
        i = src.integer(0, len(lines) - 1)
        return "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]).encode(), op
    if op == "long":
        i = src.integer(0, len(lines) - 1)
        return "".join(lines[:i] + [lines[i].rstrip("\n") + "x" * src.pick([10_000, 200_000]) + "\n"]
                       + lines[i + 1:]).encode(), op
    if op == "crlf":
        return text.replace("\n", "\r\n").encode(), op
    if op == "invalid-utf8":
        return raw + b"\xff\xfe\xc3(", op
    i, j = src.integer(0, len(lines) - 1), src.integer(0, len(lines) - 1)
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines).encode(), "swap"


# --- case kinds -------------------------------------------------------------------------------
