"""Figures of the planners: one function per figure, plain data in, a `Figure` out.

Every figure names its units in the axis titles and carries a caption that says what
to conclude, computed from the numbers it shows. Text that comes from the user (model,
cluster and layout names) is escaped for plotly, which reads a subset of HTML in labels.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from gpucluster.report.html import Figure

PALETTE = ("#2f6fdb", "#e8833a", "#3aa76d", "#c8453c", "#8a63c9", "#8c6d4f", "#d36fb8", "#7f7f7f",
           "#b5bd3a", "#2bb3c0")


def label(s: Any) -> str:
    """A user string as plotly text: escaped, so `<b>` or `<script>` show as typed."""
    return html.escape(str(s), quote=False)


def go():
    import plotly.graph_objects as go_mod
    return go_mod


def styled(fig: Any, x_title: str, y_title: str, **layout: Any) -> Any:
    opts: dict[str, Any] = {"template": "plotly_white", "margin": {"l": 70, "r": 30, "t": 70, "b": 60},
                            "font": {"size": 13}, "hoverlabel": {"namelength": -1},
                            "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0}}
    fig.update_layout(**{**opts, **layout})
    fig.update_xaxes(title_text=x_title, automargin=True)
    fig.update_yaxes(title_text=y_title, automargin=True)
    return fig


def log_axis(fig: Any, values: Sequence[float], axis: str = "x", fmt: str = "{:g}") -> None:
    """A log axis labelled at 1-2-5 steps (whole decades over a wide range), not at every minor tick."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    kw: dict[str, Any] = {"type": "log"}
    if vals:
        lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
        steps = (1,) if hi - lo > 3 else (1, 2, 5)
        ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in steps if min(vals) / 1.5 <= m * 10.0**e <= max(vals) * 1.5]
        if len(ticks) >= 2:
            kw |= {"tickvals": ticks, "ticktext": [fmt.format(t) for t in ticks]}
    (fig.update_xaxes if axis == "x" else fig.update_yaxes)(**kw)


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def step_breakdown(terms: dict[str, float], labels: dict[str, str], step_s: float) -> Figure:
    """Where one training step's time goes (seconds per term, largest first)."""
    items = sorted(((v, k) for k, v in terms.items() if v > 0), reverse=True)
    g = go()
    fig = g.Figure(g.Bar(x=[v for v, _ in items], y=[label(labels.get(k, k)) for _, k in items], orientation="h",
                         marker_color=[PALETTE[0] if k == "compute" else PALETTE[1] for _, k in items],
                         text=[f"{v:.3f} s ({pct(v / step_s)})" for v, _ in items], textposition="auto",
                         hovertemplate="%{y}: %{x:.3f} s<extra></extra>"))
    styled(fig, "time per step (s)", "", yaxis={"autorange": "reversed"})
    compute = terms.get("compute", 0.0)
    top_v, top_k = next(((v, k) for v, k in items if k != "compute"), (0.0, None))
    if top_k is None:
        tail = "nothing else is exposed: faster GPUs or lower precision are the only way to a shorter step"
    else:
        tail = (f"the largest overhead is {labels.get(top_k, top_k)} at {top_v:.3f} s ({pct(top_v / step_s)}): "
                "that is where a better layout or network would save time")
    caption = (f"Compute is {pct(compute / step_s)} of the {step_s:.3f} s step (blue); the orange bars are time "
               f"the GPUs wait on communication, the pipeline or the optimizer. {tail[0].upper() + tail[1:]}.")
    return Figure("step-breakdown", "Step-time breakdown", caption, fig)


def memory_per_gpu(layouts: Sequence[tuple[str, list[tuple[str, float]], float]]) -> Figure:
    """Memory per GPU of each layout: (layout name, [(item, bytes)], HBM bytes), stacked, with HBM marked."""
    g = go()
    fig = g.Figure()
    names = [f"#{i + 1}" for i in range(len(layouts))]
    full = [label(n) for n, _, _ in layouts]
    items = [k for k, _ in layouts[0][1]] if layouts else []
    for i, item in enumerate(items):
        fig.add_bar(x=names, y=[dict(rows).get(item, 0.0) / 2**30 for _, rows, _ in layouts], name=label(item),
                    marker_color=PALETTE[i % len(PALETTE)], customdata=full,
                    hovertemplate=f"%{{customdata}}<br>{label(item)}: %{{y:.1f}} GiB<extra></extra>")
    cap = layouts[0][2] / 2**30 if layouts else 0.0
    fig.add_hline(y=cap, line_dash="dash", line_color="#c8453c", annotation_text=f"HBM {cap:.0f} GiB",
                  annotation_position="top left")
    styled(fig, "layout, best first (rank as in the table below)", "memory per GPU (GiB)", barmode="stack",
           legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "traceorder": "normal"})
    if not layouts:
        return Figure("memory", "Memory per GPU", "No layout fits in memory.", fig)
    first = sum(v for _, v in layouts[0][1]) / 2**30
    big_item, big = max(layouts[0][1], key=lambda kv: kv[1])
    caption = (f"The recommended layout uses {first:.1f} of {cap:.0f} GiB per GPU ({pct(first / cap)}), "
               f"{cap - first:.1f} GiB of headroom; {big_item} is the largest part ({big / 2**30:.1f} GiB). "
               "A bar near the red line leaves no room for fragmentation or a longer sequence.")
    return Figure("memory", "Memory per GPU", caption, fig)


def top_layouts(layouts: Sequence[tuple[str, dict[str, float], float]], labels: dict[str, str]) -> Figure:
    """The search's best layouts: (name, terms in seconds, MFU), stacked by term, so the winner's edge shows."""
    g = go()
    fig = g.Figure()
    names = [f"#{i + 1} {label(n)}" for i, (n, _, _) in enumerate(layouts)]
    keys = [k for k in labels if any(t.get(k, 0) > 0 for _, t, _ in layouts)]
    for i, k in enumerate(keys):
        fig.add_bar(y=names, x=[t.get(k, 0.0) for _, t, _ in layouts], name=label(labels[k]), orientation="h",
                    marker_color=PALETTE[i % len(PALETTE)], hovertemplate=f"{label(labels[k])}: %{{x:.3f}} s<extra></extra>")
    styled(fig, "time per step (s)", "", barmode="stack", yaxis={"autorange": "reversed"},
           legend={"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0}, margin={"l": 70, "r": 30, "t": 20, "b": 110})
    if len(layouts) < 2:
        caption = "Only one layout was evaluated (the layout was fixed)."
    else:
        (n1, t1, m1), (n2, t2, m2) = layouts[0], layouts[1]
        s1, s2 = sum(t1.values()), sum(t2.values())
        gain, k = max((t2.get(k, 0) - t1.get(k, 0), k) for k in keys)
        faster = (f"is {100 * (s2 / s1 - 1):.1f}% faster than" if s2 > s1 * 1.0005 else "is as fast as")
        caption = (f"#1 ({n1}, MFU {pct(m1)}) {faster} #2 ({n2}, MFU {pct(m2)})"
                   + (f", mostly {gain:.3f} s less {labels[k]}" if gain > 1e-4 else "")
                   + ". Layouts within a few percent are equally good choices: pick the simpler one.")
    return Figure("top-layouts", "Top layouts of the search", caption, fig)


def scaling_curve(points: Sequence[dict[str, Any]], current_gpus: int) -> Figure:
    """Time to train and cost against GPU count: points of {gpus, time_s, cost_usd (or None), layout}."""
    g = go()
    from plotly.subplots import make_subplots
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    xs = [p["gpus"] for p in points]
    days = [p["time_s"] / 86400 for p in points]
    fig.add_trace(g.Scatter(x=xs, y=days, mode="lines+markers", name="time to train (days)",
                            line={"color": PALETTE[0]}, text=[label(p.get("layout", "")) for p in points],
                            hovertemplate="%{x} GPUs: %{y:.1f} days<br>%{text}<extra></extra>"), secondary_y=False)
    has_cost = all(p.get("cost_usd") is not None for p in points) and points
    if has_cost:
        fig.add_trace(g.Scatter(x=xs, y=[p["cost_usd"] / 1e6 for p in points], mode="lines+markers",
                                name="cost, rented (million $)", line={"color": PALETTE[1], "dash": "dot"},
                                hovertemplate="%{x} GPUs: $%{y:.2f}M<extra></extra>"), secondary_y=True)
    if xs:
        ideal = [days[0] * xs[0] / x for x in xs]
        fig.add_trace(g.Scatter(x=xs, y=ideal, mode="lines", name="perfect scaling", line={"color": "#aaa", "dash": "dash"},
                                hoverinfo="skip"), secondary_y=False)
    here = [(x, d) for x, d in zip(xs, days, strict=True) if x == current_gpus]
    if here:
        fig.add_trace(g.Scatter(x=[here[0][0]], y=[here[0][1]], mode="markers", name="this plan",
                                marker={"size": 14, "color": PALETTE[2], "symbol": "diamond"},
                                hovertemplate="this plan: %{x} GPUs, %{y:.1f} days<extra></extra>"), secondary_y=False)
    styled(fig, "GPUs (log scale)", "time to train (days)")
    fig.update_xaxes(type="log", tickvals=xs, ticktext=[f"{x:,}" for x in xs])
    fig.update_yaxes(rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="cost at the rental price (million $)", secondary_y=True, showgrid=False,
                     rangemode="tozero", type="linear")
    if len(points) < 2:
        return Figure("scaling", "Scaling: GPUs against time and cost",
                      "Only one cluster size could be planned, so there is no curve to read.", fig)
    a, b = points[0], points[-1]
    eff = (a["time_s"] / b["time_s"]) / (b["gpus"] / a["gpus"])
    caption = (f"From {a['gpus']:,} to {b['gpus']:,} GPUs the time to train falls from {a['time_s'] / 86400:.1f} to "
               f"{b['time_s'] / 86400:.1f} days: {pct(eff)} of perfect scaling (dashed).")
    if has_cost:
        caption += (f" The rented cost goes from ${a['cost_usd'] / 1e6:.2f}M to ${b['cost_usd'] / 1e6:.2f}M: "
                    "every point where the dotted line climbs buys time with money lost to communication.")
    return Figure("scaling", "Scaling: GPUs against time and cost", caption, fig)


def serving_curve(curve: Sequence[tuple[float, float, float | None]], *, slo_ttft_s: float | None,
                  slo_tpot_s: float | None, operating: tuple[float, float, float | None] | None, replica: str,
                  binding: str | None = None) -> Figure:
    """Latency against throughput of one replica: (output tokens/s, TTFT p99 s, TPOT p99 s) as load grows."""
    g = go()
    fig = g.Figure()
    x = [c[0] for c in curve]
    fig.add_scatter(x=x, y=[c[1] * 1e3 for c in curve], mode="lines", name="TTFT p99 (ms)", line={"color": PALETTE[0]},
                    hovertemplate="%{x:,.0f} tok/s: TTFT p99 %{y:,.1f} ms<extra></extra>")
    if any(c[2] is not None for c in curve):
        fig.add_scatter(x=x, y=[None if c[2] is None else c[2] * 1e3 for c in curve], mode="lines",
                        name="TPOT p99 (ms)", line={"color": PALETTE[1]},
                        hovertemplate="%{x:,.0f} tok/s: TPOT p99 %{y:,.1f} ms<extra></extra>")
    for slo, name, color in ((slo_ttft_s, "TTFT SLO", PALETTE[0]), (slo_tpot_s, "TPOT SLO", PALETTE[1])):
        if slo and x:   # a trace, not a shape: shapes on a log axis take log10 coordinates
            fig.add_scatter(x=[min(x), max(x)], y=[slo * 1e3] * 2, mode="lines", name=f"{name} {slo * 1e3:g} ms",
                            line={"color": color, "dash": "dash", "width": 1}, hoverinfo="skip")
    if operating is not None:
        fig.add_scatter(x=[operating[0]], y=[operating[1] * 1e3], mode="markers", name="operating point",
                        marker={"size": 12, "color": PALETTE[2], "symbol": "diamond"},
                        hovertemplate="operating point: %{x:,.0f} tok/s, TTFT p99 %{y:,.1f} ms<extra></extra>")
    styled(fig, "output tokens per second, one replica (tokens/s)", "p99 latency (ms)")
    fig.update_yaxes(rangemode="tozero")
    if not curve:
        return Figure("serving-curve", "Throughput against latency (one replica)", "No curve: no GPU replica.", fig)
    knee = next((c for c in curve if c[1] > 2 * curve[0][1]), curve[-1])
    caption = (f"One replica of {replica}: TTFT p99 stays near {curve[0][1] * 1e3:,.0f} ms at light load and doubles "
               f"by {knee[0]:,.0f} output tokens/s; past that, queueing makes latency climb steeply towards the "
               f"replica's limit (about {x[-1]:,.0f} tokens/s).")
    if operating is not None:
        caption += (f" The recommended deployment runs each replica at {operating[0]:,.0f} tokens/s "
                    f"({pct(operating[0] / x[-1])} of that limit)"
                    + (f"; what stops it going higher: {binding}." if binding else ", leaving headroom for bursts."))
    return Figure("serving-curve", "Throughput against latency (one replica)", caption, fig)


def serving_options(options: Sequence[dict[str, Any]]) -> Figure:
    """The deployments that meet the SLOs: {name, usd_per_mtok, gpus, ttft_p99_s}, cheapest first."""
    g = go()
    priced = [o for o in options if o.get("usd_per_mtok") is not None]
    fig = g.Figure(g.Bar(x=[label(o["name"]) for o in priced], y=[o["usd_per_mtok"] for o in priced],
                         marker_color=[PALETTE[2] if i == 0 else PALETTE[0] for i in range(len(priced))],
                         text=[f"{o['gpus']:,} GPUs" for o in priced], textposition="auto",
                         customdata=[o["ttft_p99_s"] * 1e3 for o in priced],
                         hovertemplate="%{x}: $%{y:.3f} per M tokens, TTFT p99 %{customdata:.0f} ms<extra></extra>"))
    styled(fig, "deployment (GPU type, replica shape)", "cost ($ per million output tokens)")
    if not priced:
        return Figure("serving-options", "Cost of each deployment", "No deployment has a rental price.", fig)
    best = priced[0]
    caption = f"The cheapest deployment within the SLOs is {best['name']} at ${best['usd_per_mtok']:.3f} per million output tokens."
    if len(priced) > 1:
        caption += (f" The next, {priced[1]['name']}, costs {100 * (priced[1]['usd_per_mtok'] / best['usd_per_mtok'] - 1):.0f}%"
                    " more; bars of similar height are a choice between latency and availability, not price.")
    return Figure("serving-options", "Cost of each deployment", caption, fig)


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
