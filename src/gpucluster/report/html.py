"""One self-contained HTML report: plotly.js embedded inline (opens without a network),
its partial "basic" bundle when every plot is a scatter, bar or pie (1.2 MB instead of 4.8),
every user string escaped, written atomically (a temporary file renamed into place, so
a failure or Ctrl-C never leaves half a file behind).

A `Report` is plain data (title, key facts, conclusions, figures, tables, sources); the
command that made it builds one from its result and calls `write_report`.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


PLOT_HEIGHT_PX = 430


@dataclass
class Figure:
    """One plot: a plotly figure, its title and a caption that says what to conclude."""

    key: str
    title: str
    caption: str
    fig: Any                      # plotly.graph_objects.Figure


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Report:
    title: str
    subtitle: str = ""
    facts: list[tuple[str, str]] = field(default_factory=list)      # the headline numbers
    conclusions: list[str] = field(default_factory=list)            # what to take away, first thing read
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)                  # assumptions and sources
    command: str = ""


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' can close it or open a comment."""
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       margin: 0; color: #1d2330; background: #f6f7f9; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 1.6rem; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; margin: 32px 0 8px; }
.sub { color: #566; margin: 0 0 16px; overflow-wrap: anywhere; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; margin: 16px 0; }
.fact { background: #fff; border: 1px solid #dde1e7; border-radius: 8px; padding: 10px 12px; }
.fact .k { color: #667; font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; }
.fact .v { font-size: 1.05rem; font-weight: 600; overflow-wrap: anywhere; }
.conclusions { background: #fff; border-left: 4px solid #2f6fdb; padding: 8px 16px; border-radius: 4px; }
.conclusions li { margin: 4px 0; }
figure { background: #fff; border: 1px solid #dde1e7; border-radius: 8px; margin: 18px 0; padding: 12px 14px; }
figure h3 { margin: 0 0 4px; font-size: 1.05rem; }
.plot { width: 100%; height: """ + str(PLOT_HEIGHT_PX) + """px; }
figcaption { color: #334; font-size: .93rem; margin-top: 6px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: .9rem; }
th, td { border-bottom: 1px solid #e4e7ec; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.tablewrap { overflow-x: auto; border: 1px solid #dde1e7; border-radius: 8px; }
.note { color: #556; font-size: .85rem; }
footer { color: #778; font-size: .8rem; margin-top: 32px; overflow-wrap: anywhere; }
code { background: #eef1f5; padding: 1px 4px; border-radius: 3px; }
"""

_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False, "showSendToCloud": False,
           "toImageButtonOptions": {"format": "png", "scale": 2}}


def _cell(v: Any) -> str:
    cls = ' class="num"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
    if isinstance(v, float):
        v = f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    elif isinstance(v, int) and not isinstance(v, bool):
        v = f"{v:,}"
    return f"<td{cls}>{esc(v)}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in t.rows)
    note = f'<p class="note">{esc(t.note)}</p>' if t.note else ""
    return (f"<h2>{esc(t.title)}</h2><div class=\"tablewrap\"><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>{note}")


def _figure(i: int, f: Figure) -> str:
    div = f"plot-{i}"
    return (f'<figure id="fig-{esc(f.key)}"><h3>{esc(f.title)}</h3>'
            f'<div class="plot" id="{div}" data-figure="{esc(f.key)}"></div>'
            f"<figcaption>{esc(f.caption)}</figcaption>"
            f'<script type="application/json" id="{div}-spec">{_script_json(f.fig.to_json())}</script>'
            "</figure>")


_BOOT = """
(function () {
  var config = %s;
  document.querySelectorAll("div.plot").forEach(function (div) {
    var spec = JSON.parse(document.getElementById(div.id + "-spec").textContent);
    Plotly.newPlot(div, spec.data, spec.layout || {}, config).then(function () {
      div.setAttribute("data-rendered", "1");
    });
  });
})();
"""


# plotly.js's own partial bundle (npm plotly.js-basic-dist-min, MIT, vendor/plotly-LICENSE.txt):
# the trace types below and nothing else, 1.2 MB against the full library's 4.8 MB, so a report
# stays under 1.5 MB. Its version matches the full plotly.js the installed plotly package ships.
BASIC_BUNDLE = Path(__file__).with_name("vendor") / "plotly-basic.min.js"
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})


def trace_types(report: Report) -> set[str]:
    """The plotly trace types the report's figures draw (a trace without a type is a scatter)."""
    return {getattr(t, "type", None) or "scatter" for f in report.figures for t in f.fig.data}


def plotly_bundle(report: Report) -> str:
    """The smallest plotly.js that draws every figure: the basic bundle when it covers them (and
    is installed), else the full library that the plotly package ships."""
    if trace_types(report) <= BASIC_TRACES and BASIC_BUNDLE.is_file():
        return BASIC_BUNDLE.read_text(encoding="utf-8")
    from plotly.offline import get_plotlyjs
    return str(get_plotlyjs())


def render(report: Report, plotlyjs: str | None = None) -> str:
    """The whole page as one string. `plotlyjs` is for tests (the real library is 1.2 MB, see
    plotly_bundle); a report without figures carries none of it."""
    if not report.figures:
        plotlyjs = ""
    elif plotlyjs is None:
        plotlyjs = plotly_bundle(report)
    script = f'<script type="text/javascript">{plotlyjs}</script>' if plotlyjs else ""
    from gpucluster import __version__

    facts = "".join(f'<div class="fact"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
                    for k, v in report.facts)
    concl = ("<h2>What to conclude</h2><ul class=\"conclusions\">"
             + "".join(f"<li>{esc(c)}</li>" for c in report.conclusions) + "</ul>") if report.conclusions else ""
    figs = ("<h2>Figures</h2>" + "".join(_figure(i, f) for i, f in enumerate(report.figures))) \
        if report.figures else ""
    tables = "".join(_table(t) for t in report.tables)
    notes = ("<h2>Assumptions and sources</h2><ul class=\"note\">"
             + "".join(f"<li>{esc(n)}</li>" for n in report.notes) + "</ul>") if report.notes else ""
    when = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    cmd = f" from <code>{esc(report.command)}</code>" if report.command else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(report.title)}</title>
<style>{_CSS}</style>
{script}
</head>
<body>
<main>
<h1>{esc(report.title)}</h1>
<p class="sub">{esc(report.subtitle)}</p>
<div class="facts">{facts}</div>
{concl}
{figs}
{tables}
{notes}
<footer>Made by gpucluster {esc(__version__)} on {esc(when)}{cmd}. Every number is a model prediction
unless marked measured; the sources are listed above and in the project's docs.</footer>
</main>
<script type="text/javascript">{_BOOT % _script_json(_CONFIG)}</script>
</body>
</html>
"""


def write_atomic(path: str | os.PathLike[str], text: str, field_name: str = "--html") -> Path:
    """Write `text` to `path` through a temporary file in the same folder, renamed into place
    (output_file.write_output: every OS error, a name too long, a loop of links, is one line)."""
    from gpucluster.output_file import write_output
    return write_output(path, text, field=field_name)


def write_report(report: Report, path: str, *, plotlyjs: str | None = None) -> Path:
    """Render and write the report, and say where it is (on stderr, so --json stays clean)."""
    if not report.command:
        report.command = "gpucluster " + " ".join(_quote(a) for a in sys.argv[1:])
    out = write_atomic(path, render(report, plotlyjs))
    from gpucluster.report.terminal import err_console
    err_console.print(f"HTML report written to {out} ({out.stat().st_size / 1e6:.1f} MB, opens without a network)",
                      markup=False, soft_wrap=True)
    return out


def _quote(a: str) -> str:
    import shlex
    return shlex.quote(a)
