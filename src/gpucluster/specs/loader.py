"""Load YAML specs into pydantic models, reporting errors as `file:line: field: reason`.

PyYAML's composer keeps the line of every node; we walk the node tree once to
record the line of each key path so that a pydantic validation error, which
knows only the path, can be reported at the line where the user wrote it.

Reading is bounded (specs/safe_yaml.py): a byte cap on files and text, an expanded-size and
depth cap on the node tree (aliases), and duplicate keys refused with both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpucluster.errors import UserError
from gpucluster.specs.safe_yaml import (CONSTRUCT_ERRORS, MAX_BYTES, check_text, check_tree, check_written, failing_line,
                                         read_capped, yaml_error)

M = TypeVar("M", bound=BaseModel)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: several times faster
PathKey = tuple[str | int, ...]


def _record_lines(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            _record_lines(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, (*path, i), lines)


def load_yaml_text(text: str, source: str) -> tuple[Any, dict[PathKey, int]]:
    """Parse YAML text; returns the data and a map from key path to line number."""
    check_text(text, source)
    check_written(text, source, _Loader)
    loader = _Loader(text)
    node = None
    try:
        # One parse: compose the node tree (it keeps line marks), measure it (aliases, depth,
        # duplicate keys) before anything walks it, then build the data from it.
        node = loader.get_single_node()
        if node is not None:
            check_tree(node, source)
        data = loader.construct_document(node) if node is not None else None
    except CONSTRUCT_ERRORS as exc:
        line = failing_line(node) if isinstance(exc, (ValueError, OverflowError)) else None
        raise yaml_error(exc, source, text, line) from None
    finally:
        loader.dispose()
    lines: dict[PathKey, int] = {}
    if node is not None:
        _record_lines(node, (), lines)
    return data, lines


def read_text(path: str | Path, limit: int = MAX_BYTES) -> str:
    """A spec, job or result file as text, at most `limit` bytes (see safe_yaml.read_capped)."""
    return read_capped(path, limit, what="spec or job file")


def load_yaml(path: str | Path) -> tuple[Any, dict[PathKey, int]]:
    return load_yaml_text(read_text(path), str(path))


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def line_of(loc: PathKey, lines: dict[PathKey, int]) -> int | None:
    """Line of the longest prefix of `loc` that the file wrote."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def validation_error(exc: ValidationError, source: str, lines: dict[PathKey, int],
                     prefix: PathKey = ()) -> UserError:
    """Turn the first pydantic error into one `UserError` line."""
    err = exc.errors(include_url=False)[0]
    # pydantic puts union/tag names and validator labels into loc; keep only real keys.
    loc = tuple(p for p in err["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "tagged-union")))
    full = (*prefix, *loc)
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if err["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling; `gpucluster schema` lists the fields)"
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return UserError(msg, file=source, line=line_of(full, lines), field=format_loc(full) or None)


def parse_data(model: type[M], data: Any, source: str, lines: dict[PathKey, int] | None = None,
               prefix: PathKey = (), context: dict[str, Any] | None = None) -> M:
    if data is None:
        raise UserError("the file is empty", file=source)
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise validation_error(exc, source, lines or {}, prefix) from None


def load_model(model: type[M], path: str | Path) -> M:
    data, lines = load_yaml(path)
    return parse_data(model, data, str(path), lines)
