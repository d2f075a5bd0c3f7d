"""Bounded YAML reading (issue 15, 14): alias bombs, recursive aliases, deep nesting, duplicate
keys, oversized and binary files, unreadable values: one `UserError` each, never a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import UserError
from gpucluster.specs.loader import load_yaml, load_yaml_text, read_text
from gpucluster.specs.safe_yaml import MAX_BYTES, read_capped

ROOT = Path(__file__).resolve().parents[2]

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)))


def error(text: str) -> UserError:
    with pytest.raises(UserError) as exc:
        load_yaml_text(text, "s.yaml")
    return exc.value


def test_billion_laughs_is_refused_at_the_line_where_it_passes_the_cap():
    err = error(BOMB)
    assert "aliases are expanded" in err.reason and err.line == 7 and err.file == "s.yaml"


def test_a_few_aliases_and_merge_keys_still_load():
    data, lines = load_yaml_text("base: &b {x: 1, y: 2}\none: {<<: *b, y: 3}\ntwo: *b\n", "s.yaml")
    assert data["one"] == {"x": 1, "y": 3} and data["two"] == {"x": 1, "y": 2}
    assert lines[("one",)] == 2
    load_yaml(ROOT / "examples" / "scenarios" / "shared-vs-partitioned.yaml")   # the example uses <<: *team


def test_recursive_alias_and_deep_nesting():
    assert "recursive alias" in error("a: &a [*a]\n").reason
    err = error("a: " + "[" * 70 + "]" * 70 + "\n")
    assert "nested more than 64" in err.reason and err.line == 1
    assert "nest" in error("a: " + "[" * 5000 + "]" * 5000 + "\n").message       # libyaml stops at 1,000


def test_duplicate_key_names_both_lines():
    err = error("name: x\nnode_pools:\n  - name: a\n    count: 8\n    count: 64\n")
    assert err.message == "s.yaml:5: node_pools[0].count: duplicate key (first at line 4)"
    assert error("a: {b: 1, b: 2}\n").reason == "duplicate key (first at line 1)"
    load_yaml_text("1: a\n'1': b\n", "s.yaml")           # an int key and a string key are different keys


def test_values_python_cannot_build_are_one_line_errors():
    assert "cannot be read" in error("n: " + "1" * 5000 + "\n").reason        # int() digit limit
    assert "cannot be read" in error("d: 2024-13-45\n").reason                 # not a date
    err = error("name: x\nb: y\x00\n")
    assert err.line == 2 and "#x0000" in err.reason
    assert "YAML syntax error" in error("a: [1,\n").reason


def test_size_caps(tmp_path):
    with pytest.raises(UserError, match="is a device"):
        read_text("/dev/zero")
    with pytest.raises(UserError, match="larger than"):
        load_yaml_text("a: 1\n" + "#" * MAX_BYTES, "big.yaml")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" * 300)
    with pytest.raises(UserError, match="1,000 bytes"):
        read_capped(big, limit=1000)


def test_binary_and_universal_newlines(tmp_path):
    p = tmp_path / "b.yaml"
    p.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(UserError, match="not UTF-8"):
        load_yaml(p)
    p.write_bytes(b"a: 1\r\nb: [\r\n")
    with pytest.raises(UserError) as exc:
        load_yaml(p)
    assert exc.value.line == 3                          # \r\n counted as one line break
    with pytest.raises(UserError, match="directory"):
        read_text(tmp_path)


def test_the_pure_python_parser_is_bounded_too(monkeypatch):
    """Without libyaml (a wheel-less install) the same limits hold; deep nesting there ends in
    a RecursionError inside PyYAML, reported as one line."""
    import yaml

    from gpucluster.specs import loader
    monkeypatch.setattr(loader, "_Loader", yaml.SafeLoader)
    assert "aliases are expanded" in error(BOMB).reason
    assert "nest" in error("a: " + "[" * 5000 + "]" * 5000 + "\n").reason
    assert error("a: 1\na: 2\n").line == 2
