"""YAML errors point at the file, the line and the field."""

import pytest
from pydantic import BaseModel, ConfigDict, PositiveInt

from gpucluster.errors import UserError
from gpucluster.specs.loader import load_model


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: PositiveInt


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    items: list[Inner]


def load(tmp_path, text):
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return p, lambda: load_model(Outer, p)


def test_field_error_names_line_and_path(tmp_path):
    p, go = load(tmp_path, "name: x\nitems:\n  - count: 1\n  - count: 0\n")
    with pytest.raises(UserError) as exc:
        go()
    assert exc.value.message.startswith(f"{p}:4: items[1].count: ")
    assert "greater than 0" in exc.value.message


def test_unknown_field_is_named(tmp_path):
    _, go = load(tmp_path, "name: x\nitems: []\ncolour: red\n")
    with pytest.raises(UserError) as exc:
        go()
    assert exc.value.line == 3 and exc.value.field == "colour" and "unknown field" in exc.value.reason


def test_syntax_error_has_a_line(tmp_path):
    _, go = load(tmp_path, "name: x\nitems:\n  - count: [1,\n")
    with pytest.raises(UserError) as exc:
        go()
    assert "YAML syntax error" in exc.value.message and exc.value.line is not None


def test_empty_and_missing_files(tmp_path):
    _, go = load(tmp_path, "")
    with pytest.raises(UserError, match="empty"):
        go()
    with pytest.raises(UserError, match="file not found"):
        load_model(Outer, tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="directory"):
        load_model(Outer, tmp_path)
