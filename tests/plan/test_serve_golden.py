"""`plan serve` recommends what it did before the serving planner was sped up (cached groups and
step times): tests/plan/data/serve_golden.json, computed at commit 73e3e77 and regenerated
when the step model moved to measured kernels and the engine (issue 24)."""

import json
import math
from pathlib import Path

import pytest

from serve_golden import CASES, run_one

EXPECTED = json.loads((Path(__file__).parent / "data" / "serve_golden.json").read_text())


def _same(got: object, want: object, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool) and isinstance(got, int | float):
        assert got == pytest.approx(want, rel=1e-9) or (math.isnan(want) and math.isnan(got)), where
    else:
        assert got == want, where


@pytest.mark.parametrize("case", list(CASES))
def test_recommendations_unchanged(case: str) -> None:
    _same(run_one(CASES[case]), EXPECTED[case], case)
