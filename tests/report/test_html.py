"""The HTML report page: escaping, self-contained, atomic writes."""

import os
import re

import pytest

from gpucluster.errors import UserError
from gpucluster.report import html as H
from gpucluster.report.figures import step_breakdown

XSS = "<script>alert(1)</script>"
STUB_JS = "/* plotly stub */"


def _report(name: str = XSS) -> H.Report:
    fig = step_breakdown({"compute": 1.0, "dp_comm": 0.2}, {"compute": name, "dp_comm": "dp"}, 1.2)
    return H.Report(title=f"Plan on {name}", subtitle=name, facts=[("cluster", name)], conclusions=[name],
                    figures=[fig], tables=[H.Table(name, ["col", name], [[name, 1.5]], note=name)], notes=[name],
                    command=f"gpucluster plan train --cluster '{name}'")


def test_user_strings_are_escaped_everywhere():
    page = H.render(_report(), STUB_JS)
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # The only <script> elements are ours: the library, the figure specs and the boot code.
    assert page.count("<script") == 3
    # A figure spec cannot close its <script> element early.
    found = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
    assert found is not None
    spec = found.group(1)
    assert "<" not in spec and ">" not in spec


def test_self_contained_no_network_references():
    page = H.render(_report("cluster-a"))           # the real plotly.js, inline
    assert len(page) > 1_000_000 and "Plotly.newPlot" in page
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(https?:)?//""", page.split("</script>", 1)[1], re.I)
    assert "cdn.plot.ly" not in page.split("</script>", 1)[1]


def test_render_has_viewport_title_and_captions():
    page = H.render(_report("c1"), STUB_JS)
    assert '<meta name="viewport"' in page and "<title>Plan on c1</title>" in page
    assert "<figcaption>Compute is" in page


def test_write_is_atomic_and_reports_the_path(tmp_path, capsys):
    out = H.write_report(_report("c1"), str(tmp_path / "r.html"), plotlyjs=STUB_JS)
    assert out == (tmp_path / "r.html").resolve() and out.read_text().startswith("<!DOCTYPE html>")
    assert str(out) in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_interrupted_write_leaves_nothing_behind(tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("old report")

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        H.write_atomic(target, "new")
    assert target.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


@pytest.mark.parametrize("bad, needle", [("missing/dir/r.html", "does not exist"), (".", "is a folder")])
def test_bad_paths_are_one_line_user_errors(tmp_path, bad, needle):
    with pytest.raises(UserError) as e:
        H.write_atomic(tmp_path / bad, "x")
    assert needle in e.value.message and "--html" in e.value.message and "\n" not in e.value.message


def test_a_report_without_figures_carries_no_plotly():
    from gpucluster.report.html import Report, render

    page = render(Report(title="t", subtitle="s", facts=[("a", "b")], conclusions=["c"], figures=[], tables=[],
                         notes=[]))
    assert len(page) < 50_000   # plotly.js alone is ~4.8 MB
