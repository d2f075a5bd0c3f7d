"""Bounded reading and YAML composition: what every spec and job-file reader goes through.

Input can be hostile or just wrong (`/dev/zero` given as a spec, a binary file, a "billion
laughs" document whose aliases expand exponentially, a key written twice). Each of these must
give one `UserError` line quickly, never a hang, an unbounded allocation or a silent accept:

- files are read with a byte cap (the read stops at the cap, so `/dev/zero` costs 4 MiB);
- the composed node tree is measured before anything walks or constructs it: aliases count
  once per use (the expanded size that line recording and pydantic would see), the depth is
  capped, and an alias that contains itself is refused;
- a key written twice in one mapping is an error naming both lines (PyYAML keeps the last).

Pure functions of the text: no dependency on the rest of gpucluster but `UserError`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from gpucluster.errors import UserError

MAX_BYTES = 4 * 2**20            # a spec or job file; the largest shipped file is 0.26 MiB
MAX_NODES = 1_000_000            # values after alias expansion; the largest shipped file has 25,000
MAX_DEPTH = 64                   # nesting; specs nest 5-6 levels
MAX_WRITTEN = 250_000            # values as written (before aliases): composing costs ~5 us each
PathKey = tuple[str | int, ...]


# Read although not regular files: standard input named on purpose (`--cluster /dev/stdin`, a
# pipe or a redirect; from a terminal it waits for typing, as `cat` does).
STDIN_PATHS = ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")


def open_regular(path: str | Path, what: str = "file") -> int:
    """A file descriptor open for reading, refused with one line unless `path` is a regular file
    (or standard input, STDIN_PATHS). Opened non-blocking, then checked with fstat: a named
    pipe with no writer, a terminal or a socket never blocks the open, and nothing can swap
    the file between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, expected a {what}", file=str(path)) from None
    except (OSError, ValueError) as exc:          # ValueError: a NUL byte in the path
        raise UserError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", file=str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UserError(f"is a directory, expected a {what}", file=str(path))
        if not stat.S_ISREG(mode) and str(path) not in STDIN_PATHS:
            kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
            raise UserError(f"is {kind}, expected a {what} (save it to a file first)", file=str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_capped(path: str | Path, limit: int = MAX_BYTES, what: str = "file") -> str:
    """The file as text, refused with one line when it is larger than `limit` bytes (read no
    further than that), missing, a folder, a pipe, device or socket (open_regular), unreadable
    or not UTF-8."""
    fd = open_regular(path, what)
    try:
        with open(fd, "rb") as f:
            data = f.read(limit + 1)
    except IsADirectoryError:
        raise UserError(f"is a directory, expected a {what}", file=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if len(data) > limit:
        raise UserError(f"larger than {_size(limit)}: too big for a {what} (is it the right file?)",
                        file=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}: {exc.reason}); is it a binary file?",
                        file=str(path)) from None
    # Universal newlines, as Path.read_text gives: line numbers count \r\n and \r as one break.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


def check_text(text: str, source: str, limit: int = MAX_BYTES) -> None:
    """Text handed over without a file (a string, a generated document) gets the same cap."""
    if len(text) > limit:
        raise UserError(f"larger than {_size(limit)}: too big for a spec", file=source)


def check_written(text: str, source: str, loader_class: type, max_nodes: int = MAX_WRITTEN) -> None:
    """Refuse a document of more than `max_nodes` values before composing it: libyaml builds a
    Python node for each (a 4 MiB list of numbers is 2M nodes, ~10 s and ~700 MB). Every node
    but the first starts at a separator (`,` `:` `-` `?` `[` `{` or a line break), so when
    twice their count is within the cap the text is small enough (the common case: one pass of
    str.count); otherwise the parser's events are counted, stopping at the cap (~0.3 s)."""
    bound = sum(text.count(c) for c in ",:-?[{\n")
    if 2 * bound + 2 <= max_nodes:
        return
    count = 0
    try:
        for event in yaml.parse(text, Loader=loader_class):
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent, yaml.AliasEvent)):
                count += 1
                if count > max_nodes:
                    raise UserError(f"more than {max_nodes:,} values (not a spec file, or one to split)",
                                    file=source, line=event.start_mark.line + 1 if event.start_mark else None)
    except yaml.YAMLError:
        return                   # the composer reports the syntax error at its line


def _children(node: yaml.Node) -> list[tuple[str | int, yaml.Node]]:
    if isinstance(node, yaml.MappingNode):
        out: list[tuple[str | int, yaml.Node]] = []
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else "?"
            out += [(key, k), (key, v)]
        return out
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    return []


def _field(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def _duplicates(node: yaml.MappingNode, path: PathKey, source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for k, _ in node.value:
        # `<<` merge keys may repeat (YAML 1.1 merges); only explicit scalar keys are compared,
        # by tag and text, so that `1:` and `"1":` stay different keys.
        if not isinstance(k, yaml.ScalarNode) or k.tag == "tag:yaml.org,2002:merge":
            continue
        line = k.start_mark.line + 1
        if (k.tag, k.value) in seen:      # (a flow mapping `{a: 1, a: 2}` repeats on one line)
            raise UserError(f"duplicate key (first at line {seen[k.tag, k.value]})", file=source, line=line,
                            field=_field((*path, k.value)))
        seen[k.tag, k.value] = line


def check_tree(root: yaml.Node, source: str, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> int:
    """Refuse a tree too large once aliases are expanded, too deep, recursive, or with a key
    written twice; returns its expanded size. Each distinct node is visited once (its expanded
    size is memoised), so a billion-laughs document costs its length, not its expansion."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()                          # started, not finished: the ancestors
    stack: list[tuple[yaml.Node, PathKey, bool]] = [(root, (), False)]
    while stack:
        node, path, done = stack.pop()
        key = id(node)
        kids = _children(node)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for _, c in kids)
            depth[key] = 1 + max((depth[id(c)] for _, c in kids), default=0)
            line = node.start_mark.line + 1
            if size[key] > max_nodes:
                raise UserError(f"more than {max_nodes:,} values once aliases are expanded (an alias "
                                "bomb, or not a spec file)", file=source, line=line, field=_field(path) or None)
            if depth[key] > max_depth:
                raise UserError(f"nested more than {max_depth} levels deep", file=source, line=line,
                                field=_field(path) or None)
            continue
        if key in size:
            continue
        if key in open_:
            raise UserError("an alias refers to a node that contains it (a recursive alias)", file=source,
                            line=node.start_mark.line + 1, field=_field(path) or None)
        if len(open_) >= max_depth:
            raise UserError(f"nested more than {max_depth} levels deep", file=source,
                            line=node.start_mark.line + 1, field=_field(path) or None)
        open_.add(key)
        stack.append((node, path, True))
        if isinstance(node, yaml.MappingNode):
            _duplicates(node, path, source)
        stack.extend((child, (*path, sub), False) for sub, child in reversed(kids))
    return size[id(root)]


def yaml_error(exc: Exception, source: str, text: str | None = None, line: int | None = None) -> UserError:
    """A PyYAML (or value construction) error as one line at its line."""
    if isinstance(exc, yaml.reader.ReaderError) and text is not None:
        # A NUL or other control byte: the reader knows the offset, not the line. (libyaml gives
        # the code point as an int and a UTF-8 byte offset, the pure-Python reader a str and a
        # character offset.)
        if isinstance(exc.character, int):
            code, line = exc.character, text.encode("utf-8", "replace")[:exc.position].count(b"\n") + 1
        else:
            code, line = ord(str(exc.character)[:1] or "\0"), text.count("\n", 0, exc.position) + 1
        return UserError(f"character #x{code:04x} is not allowed in YAML (a binary file?)", file=source, line=line)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        return UserError(f"YAML syntax error: {' '.join(reason.split())}", file=source,
                         line=mark.line + 1 if mark else None)
    if isinstance(exc, RecursionError):
        return UserError(f"nested too deeply (more than {MAX_DEPTH} levels)", file=source)
    if isinstance(exc, yaml.YAMLError):
        return UserError(f"YAML error: {' '.join(str(exc).split())}", file=source)
    # int('1' * 5000) (Python's digit limit), a date 2024-13-45, an overflowing float: the
    # constructor raises a plain ValueError or OverflowError without a mark (see failing_line).
    return UserError(f"a value cannot be read: {' '.join(str(exc).split())[:200]}", file=source, line=line)


def failing_line(root: yaml.Node | None) -> int | None:
    """The line of the first scalar in the tree that cannot be built on its own (a date
    2024-13-45, an int of 5,000 digits): the constructor's ValueError carries no mark. Only
    called on that error; each node is visited once."""
    if root is None:
        return None
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            try:
                yaml.constructor.SafeConstructor().construct_object(node)
            except CONSTRUCT_ERRORS:    # the error being looked for: this scalar is the one
                return node.start_mark.line + 1
        else:
            stack.extend(reversed([c for _, c in _children(node)]))
    return None


# What composing and constructing a document can raise on bad input, besides YAMLError.
CONSTRUCT_ERRORS = (yaml.YAMLError, ValueError, OverflowError, TypeError, RecursionError)
