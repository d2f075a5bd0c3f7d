"""Every HTML report the CLI writes stays self-contained, offline and at most 1.5 MB (issue 22:
they were 4.9 MB each with the full plotly.js inline).

The commands run in-process (typer's CliRunner) except the sweep, whose workers are processes
(that test runs the console script and is marked `integration` by tests/conftest.py).
"""

from __future__ import annotations

import os
import re
from types import ModuleType
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "documents"))

from doc_helpers import invoke

from gpucluster.report import html as H

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 1_500_000
# A script element or stylesheet that fetches anything: http(s) or protocol-relative.
_FETCH = re.compile(r"""<(script|link|img|iframe|source|embed)\b[^>]*\b(src|href)\s*=\s*["']?\s*(https?:)?//""", re.I)


def _invoke(*args: str) -> int:
    return invoke(*args).exit_code


def _report_cli() -> ModuleType:
    """test_report_cli's fixtures-as-functions (its scenario and bench result), one copy."""
    sys.path.insert(0, str(ROOT / "tests/report"))
    import test_report_cli
    return test_report_cli


def _bench_result(folder: Path) -> Path:
    return _report_cli().bench_result(folder)


def _assert_small_and_offline(path: Path) -> str:
    page = path.read_text(encoding="utf-8")
    size = path.stat().st_size
    assert size <= MAX_BYTES, f"{path.name}: {size / 1e6:.2f} MB > {MAX_BYTES / 1e6} MB"
    assert not _FETCH.search(page), f"{path.name} fetches from the network"
    # The library is inline: the page's only script sources are its own elements.
    assert not re.search(r"<script\b[^>]*\bsrc\s*=", page, re.I), path.name
    if 'class="plot"' in page:
        assert "Plotly.newPlot" in page and "plotly.js" in page[:200_000], path.name
    return page


def _cases(tmp: Path) -> dict[str, list[str]]:
    scenario = _report_cli().tiny_scenario(tmp)
    return {
        "plan-train": ["plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
                       "--tokens", "2T"],
        "plan-serve": ["plan", "serve", "--model", "llama3-8b", "--rate", "20", "--gpu", "H100:8",
                       "--slo-ttft", "500ms", "--compare", "A100"],
        "cost": ["cost", "examples/seed-figures/tco-512-h200.yaml"],
        "reliability": ["reliability", "examples/h200-256-ndr400.yaml", "--interval", "30m"],
        "check": ["check", "examples/h200-256-100gbe.yaml", "--job", "examples/jobs/bad-train.sbatch"],
        "simulate": ["simulate", str(scenario)],
        "simulate-compare": ["simulate", "compare", str(scenario), "--policies", "fifo,sjf"],
        "comm": ["comm", "--cluster", "examples/h200-256-ndr400.yaml", "--gpus", "256"],
        "diagnose": ["diagnose", "--cluster", "examples/h100-64-ib.yaml", str(_bench_result(tmp))],
    }


@pytest.mark.slow
def test_every_report_kind_is_small_and_offline(tmp_path):
    for name, args in _cases(tmp_path).items():
        out = tmp_path / f"{name}.html"
        assert _invoke(*args, "--html", str(out)) in (0, 1), name
        _assert_small_and_offline(out)


def test_sweep_report_is_small_and_offline(tmp_path):
    out = tmp_path / "sweep.html"
    exe = Path(sys.executable).parent / "gpucluster"
    proc = subprocess.run([str(exe), "sweep", "examples/sweeps/plan-grid.yaml", "--workers", "2", "--html", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr
    _assert_small_and_offline(out)


def test_the_partial_bundle_draws_every_trace_the_reports_use():
    """The basic bundle has scatter, bar and pie; a figure of another type gets the full library,
    so a new chart type can never render blank."""
    import plotly.graph_objects as go

    bar = H.Report(title="t", figures=[H.Figure("a", "A", "c", go.Figure(go.Bar(x=[1], y=[2])))])
    heat = H.Report(title="t", figures=[H.Figure("h", "H", "c", go.Figure(go.Heatmap(z=[[1, 2]])))])
    assert H.trace_types(bar) == {"bar"} and H.trace_types(heat) == {"heatmap"}
    small, full = H.render(bar), H.render(heat)
    assert "plotly.js (basic - minified)" in small
    assert len(small) < MAX_BYTES < len(full)
    assert "(basic - minified)" not in full


def test_the_bundle_is_the_installed_plotly_version():
    """The vendored bundle and the figures' JSON (from the installed plotly package) must agree on
    plotly.js's version; a plotly upgrade without a new bundle fails here, not in a browser."""
    from plotly.offline import get_plotlyjs

    def version(js: str) -> str:
        found = re.search(r"plotly\.js[^\n]*?v(\d+\.\d+\.\d+)", js[:500])
        assert found, js[:200]
        return found.group(1)

    assert H.BASIC_BUNDLE.is_file()
    assert version(H.BASIC_BUNDLE.read_text(encoding="utf-8")) == version(get_plotlyjs())
