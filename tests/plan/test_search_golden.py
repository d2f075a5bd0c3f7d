"""The search's top 10 layouts, step times and counts stay what they were before the search
reused its memory terms (tests/plan/data/search_top10.json, computed at commit 73e3e77)."""

import json
from pathlib import Path

import pytest

from search_golden import run

EXPECTED = json.loads((Path(__file__).parent / "data" / "search_top10.json").read_text())


@pytest.fixture(scope="module")
def actual() -> dict:
    return run()


@pytest.mark.parametrize("case", list(EXPECTED))
def test_top_layouts_unchanged(case: str, actual: dict) -> None:
    want, got = EXPECTED[case], actual[case]
    assert [r.get("layout") for r in got] == [r.get("layout") for r in want]
    for g, w in zip(got[:-1], want[:-1], strict=True):
        assert g["step_s"] == pytest.approx(w["step_s"], rel=1e-9)
        assert g["memory"] == pytest.approx(w["memory"], rel=1e-9)
    assert got[-1] == want[-1]
