"""Figures of cost, reliability, the simulator and the fabric: one function per figure.

Like figures.py: plain data in, a `Figure` with units in its axis titles and a caption
that says what to conclude out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.report.figures import PALETTE, go, label, log_axis, pct, styled
from gpucluster.report.html import Figure


def build_vs_rent(months: Sequence[int], build_usd: Sequence[float], rent_usd: Mapping[str, Sequence[float]],
                  break_even: Mapping[str, float | None]) -> Figure:
    """Cumulative cost of owning against renting each option, month by month, break-even marked."""
    g = go()
    fig = g.Figure()
    fig.add_scatter(x=list(months), y=[v / 1e6 for v in build_usd], mode="lines", name="build (capital + operating)",
                    line={"color": PALETTE[0], "width": 3}, hovertemplate="month %{x}: $%{y:.2f}M<extra>build</extra>")
    for i, (name, values) in enumerate(rent_usd.items()):
        fig.add_scatter(x=list(months), y=[v / 1e6 for v in values], mode="lines", name=f"rent {label(name)}",
                        line={"color": PALETTE[1 + i % (len(PALETTE) - 1)], "dash": "dot"},
                        hovertemplate=f"month %{{x}}: $%{{y:.2f}}M<extra>rent {label(name)}</extra>")
    for i, (name, m) in enumerate(break_even.items()):
        if m is None or m > months[-1]:
            continue
        at = build_usd[0] + (build_usd[-1] - build_usd[0]) * m / months[-1]
        fig.add_scatter(x=[m], y=[at / 1e6], mode="markers+text", name=f"break-even, {label(name)}",
                        marker={"size": 12, "symbol": "x", "color": PALETTE[1 + i % (len(PALETTE) - 1)]},
                        text=[f"{m:.0f} mo"], textposition="top left",
                        hovertemplate=f"break-even with {label(name)}: month %{{x:.1f}}<extra></extra>")
    styled(fig, "months from purchase (months)", "cumulative cost (million $)")
    fig.update_yaxes(rangemode="tozero")
    parts = []
    for name, m in break_even.items():
        parts.append(f"renting {name} is cheaper for ever" if m is None else
                     f"owning beats renting {name} after {m:.0f} months" if m <= months[-1] else
                     f"owning beats renting {name} only after {m:.0f} months, beyond this view")
    caption = ("Building costs its capital on day one, then power, space and staff each month (thick line); "
               "renting costs the hourly price of the GPUs used (dotted). " + _cap("; ".join(parts)) + ". "
               "Buy only if you will keep the cluster busy for longer than the break-even.")
    return Figure("build-vs-rent", "Build against rent: cumulative cost", caption, fig)


def checkpoint_timeline(*, mtbf_s: float, interval_s: float, write_s: float, restart_s: float, goodput: float,
                        tier: str, hours: float | None = None) -> Figure:
    """A run's useful work against wall clock when failures come every MTBF (a typical, evenly spaced
    run): progress climbs, pauses to checkpoint, falls back to the last checkpoint at each failure."""
    g = go()
    span = hours * 3600 if hours else min(max(4 * mtbf_s, 6 * interval_s), 30 * 86400)
    t, work, saved = 0.0, 0.0, 0.0
    xs, ys = [0.0], [0.0]
    fails: list[float] = []
    next_fail = mtbf_s * 0.93              # off the checkpoint grid, so a failure loses some work

    def point(x: float, y: float) -> None:
        xs.append(x)
        ys.append(y)

    while t < span and len(xs) < 20000:
        next_ckpt = t + interval_s         # progress is linear between events: one point per event
        if next_fail <= next_ckpt:
            work += next_fail - t
            t = next_fail
            fails.append(t)
            point(t, work)
            work = saved
            point(t, work)
            t += restart_s
            point(t, work)
            next_fail += mtbf_s
            continue
        work += interval_s
        t = next_ckpt
        point(t, work)
        t += write_s                       # the GPUs write the checkpoint, no progress
        saved = work
        point(t, work)
    fig = g.Figure()
    lost = [(x - y) / 3600 for x, y in zip(xs, ys, strict=True)]
    fig.add_scatter(x=[x / 3600 for x in xs], y=lost, mode="lines", name="wall clock not spent on useful work",
                    line={"color": PALETTE[0]}, hovertemplate="at %{x:.1f} h: %{y:.2f} h lost so far<extra></extra>")
    fig.add_scatter(x=[0, span / 3600], y=[0, (1 - goodput) * span / 3600], mode="lines",
                    name=f"on average (goodput {goodput:.2%})", line={"color": PALETTE[2], "dash": "dot"},
                    hoverinfo="skip")
    if fails:
        at = dict(zip(xs, lost, strict=True))
        fig.add_scatter(x=[f / 3600 for f in fails], y=[at.get(f, 0.0) for f in fails], mode="markers", name="failure",
                        marker={"symbol": "x", "size": 11, "color": PALETTE[3]},
                        hovertemplate="failure at %{x:.1f} h<extra></extra>")
    styled(fig, "wall-clock time (h)", "time lost so far (h)")
    fig.update_yaxes(rangemode="tozero")
    caption = (f"Checkpointing to {tier} every {interval_s / 60:.0f} min ({write_s:.0f} s per write) with a failure "
               f"every {mtbf_s / 3600:.1f} h (red marks). Between failures the line creeps up by the checkpoint "
               f"writes; each failure adds a step: the work since the last checkpoint plus {restart_s / 60:.1f} min "
               f"to restart. On average {1 - goodput:.2%} of the wall clock is lost (dotted line): "
               f"goodput {goodput:.2%}.")
    return Figure("checkpoint-timeline", "Failures, checkpoints and goodput over a run", caption, fig)


def mtbf_by_size(points: Sequence[tuple[int, float]], profile: str,
                 claims: Sequence[tuple[int, float]] = ()) -> Figure:
    """Mean time between job interruptions (hours) against job size (GPUs), log-log."""
    g = go()
    fig = g.Figure()
    fig.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers",
                    name=f"profile {label(profile)}", line={"color": PALETTE[0]},
                    hovertemplate="%{x:,} GPUs: one interruption every %{y:.2f} h<extra></extra>")
    if claims:
        fig.add_scatter(x=[c[0] for c in claims], y=[c[1] for c in claims], mode="markers", name="the seed's claims",
                        marker={"size": 11, "symbol": "x", "color": PALETTE[3]},
                        hovertemplate="seed: %{x:,} GPUs, every %{y:.2f} h<extra></extra>")
    styled(fig, "GPUs in the job (log scale)", "mean time between interruptions (h, log scale)")
    log_axis(fig, [p[0] for p in points], "x", "{:,.0f}")
    log_axis(fig, [p[1] for p in points] + [c[1] for c in claims], "y")
    big = max(points, key=lambda p: p[0]) if points else None
    caption = ("A job fails when any of its GPUs, hosts or links does, so the time between interruptions falls as "
               "1/N: ten times the GPUs, ten times the failures."
               + (f" At {big[0]:,} GPUs the profile expects one every {big[1]:.2f} h: checkpointing and automatic "
                  "restart are not optional at that size." if big else ""))
    return Figure("mtbf", "Time between job interruptions by job size", caption, fig)


def goodput_vs_interval(tiers: Sequence[dict[str, Any]], mtbf_s: float, given_s: float | None = None) -> Figure:
    """Goodput against checkpoint interval for each tier: {name, write_s, restart_s, optimal_s, goodput}."""
    from gpucluster.model.reliability import goodput

    g = go()
    fig = g.Figure()
    lo = max(10.0, min(t["optimal_s"] for t in tiers) / 20)
    hi = max(t["optimal_s"] for t in tiers) * 20
    grid = [lo * (hi / lo) ** (i / 80) for i in range(81)]
    for i, t in enumerate(tiers):
        color = PALETTE[i % len(PALETTE)]
        ys = [100 * goodput(x, t["write_s"], mtbf_s, t["restart_s"]) for x in grid]
        fig.add_scatter(x=[x / 60 for x in grid], y=ys, mode="lines", name=label(t["name"]), line={"color": color},
                        hovertemplate="every %{x:.1f} min: %{y:.2f}%<extra></extra>")
        fig.add_scatter(x=[t["optimal_s"] / 60], y=[100 * t["goodput"]], mode="markers", showlegend=False,
                        marker={"size": 11, "color": color, "symbol": "diamond"},
                        hovertemplate="best (Daly): every %{x:.1f} min, %{y:.2f}%<extra></extra>")
    if given_s:
        fig.add_scatter(x=[given_s / 60] * 2, y=[0, 100], mode="lines", name=f"your interval ({given_s / 60:g} min)",
                        line={"color": "#555", "dash": "dash"}, hoverinfo="skip")
    styled(fig, "checkpoint interval (min, log scale)", "goodput (% of wall clock)")
    log_axis(fig, [x / 60 for x in grid], "x")
    best = max(tiers, key=lambda t: t["goodput"])
    lows = [100 * goodput(x, best["write_s"], mtbf_s, best["restart_s"]) for x in grid]
    fig.update_yaxes(range=[max(0.0, min(lows) - 2), 100.5])
    caption = (f"With a job failure every {mtbf_s / 3600:.1f} h, the best interval (diamonds, Daly 2006) is "
               f"{best['optimal_s'] / 60:.0f} min to {best['name']}, for {best['goodput']:.1%} goodput. "
               "Checkpointing more often wastes time writing; less often loses more work per failure. The curve "
               "is flat near its top: being within 2x of the optimum costs little, being 10x off costs a lot.")
    return Figure("goodput-vs-interval", "Goodput against checkpoint interval", caption, fig)


def sim_utilization(series: Mapping[str, Mapping[str, Sequence[float]]],
                    means: Mapping[str, tuple[float | None, float | None]] | None = None) -> Figure:
    """Allocation and busy % over time for each policy (the simulator's `timeseries`). The caption
    quotes `means` (policy -> run-wide allocation, busy: the summary's, as its table shows them);
    without them, the time average of the plotted series."""
    g = go()
    fig = g.Figure()
    for i, (policy, ts) in enumerate(series.items()):
        if not ts:
            continue
        color = PALETTE[i % len(PALETTE)]
        days = [h / 24 for h in ts["t_hours"]]
        fig.add_scatter(x=days, y=[100 * v for v in ts["allocation"]], mode="lines", name=f"{label(policy)}: allocated",
                        line={"color": color}, hovertemplate="day %{x:.1f}: %{y:.0f}% allocated<extra></extra>")
        fig.add_scatter(x=days, y=[100 * v for v in ts["busy"]], mode="lines", name=f"{label(policy)}: busy",
                        line={"color": color, "dash": "dot"}, hovertemplate="day %{x:.1f}: %{y:.0f}% busy<extra></extra>")
    styled(fig, "simulated time (days)", "GPUs (% of capacity)")
    fig.update_yaxes(range=[0, 102])
    if means is None:
        means = {p: (sum(ts["allocation"]) / len(ts["allocation"]), sum(ts["busy"]) / len(ts["busy"]))
                 for p, ts in series.items() if ts and ts["allocation"]}
    shown = {p: (a, b) for p, (a, b) in means.items() if a is not None and b is not None}
    if not shown:
        return Figure("utilization", "Allocation and busy GPUs over time", "The run recorded no samples.", fig)
    # one decimal, as the report's tables print these fractions
    text = "; ".join(f"{p}: {100 * a:.1f}% allocated, {100 * b:.1f}% busy" for p, (a, b) in shown.items())
    caption = (f"Solid lines are GPUs allocated to jobs, dotted lines GPUs computing (allocated less checkpoint "
               f"writes, reloads after restarts and moves, and idle time inside jobs). Over the run, {text}. "
               "The gap between the lines is time jobs held GPUs without computing; the gap above the solid line "
               "is capacity the scheduler left idle. Keeping GPUs allocated is not the goal: compare completion "
               "times and goodput.")
    return Figure("utilization", "Allocation and busy GPUs over time", caption, fig)


def jct_distribution(jcts: Mapping[str, Sequence[float]],
                     quantiles: Mapping[str, tuple[float, float]] | None = None) -> Figure:
    """Empirical distribution (CDF) of job completion times for each policy, in hours. The caption
    quotes `quantiles` (policy -> median and p99 in seconds, as the report's table shows them)."""
    g = go()
    fig = g.Figure()
    medians: dict[str, tuple[float, float, int]] = {}
    for i, (policy, values) in enumerate(jcts.items()):
        v = sorted(x / 3600 for x in values if x > 0)
        if not v:
            continue
        n = len(v)
        idx = sorted({min(n - 1, round(k * (n - 1) / 199)) for k in range(200)})     # at most 200 points
        fig.add_scatter(x=[v[j] for j in idx], y=[100 * (j + 1) / n for j in idx], mode="lines",
                        name=label(policy), line={"color": PALETTE[i % len(PALETTE)], "shape": "hv"},
                        hovertemplate="%{y:.0f}% of jobs within %{x:.2f} h<extra></extra>")
        q = (quantiles or {}).get(policy)
        if q is None:
            q = (_percentile(list(values), 50), _percentile(list(values), 99))
        medians[policy] = (q[0] / 3600, q[1] / 3600, len(values))
    styled(fig, "job completion time, submit to end (h, log scale)", "jobs completed within (% of jobs)")
    log_axis(fig, [x / 3600 for v in jcts.values() for x in v if x > 0], "x")
    fig.update_yaxes(range=[0, 101])
    if not medians:
        return Figure("jct", "Job completion time by policy", "No job completed.", fig)
    text = "; ".join(f"{p}: median {_hours(m)}, p99 {_hours(q)} ({n:,} jobs)" for p, (m, q, n) in medians.items())
    best = min(medians, key=lambda p: medians[p][0])
    caption = (f"A curve further left finishes jobs sooner. {text}. "
               + (f"{best} has the shortest median; compare the right-hand tails to see who waits longest."
                  if len(medians) > 1 else "The right-hand tail is the jobs that waited longest."))
    return Figure("jct", "Job completion time by policy", caption, fig)


def _percentile(values: list[float], q: float) -> float:
    import numpy as np
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _hours(h: float) -> str:
    """Hours as the report's tables print durations (format_duration), so a caption and its table agree."""
    from gpucluster.units import format_duration
    return format_duration(h * 3600)


def bandwidth_curves(op: str, expected: Sequence[tuple[float, float]],
                     measured: Sequence[tuple[float, float]] | None = None, where: str = "") -> Figure:
    """Bus bandwidth against message size: (bytes, GB/s) expected by the model, and measured if given."""
    g = go()
    fig = g.Figure()
    fig.add_scatter(x=[s for s, _ in expected], y=[b for _, b in expected], mode="lines+markers", name="expected (model)",
                    line={"color": PALETTE[0]}, hovertemplate="%{x:.3s}B: %{y:.1f} GB/s<extra>expected</extra>")
    if measured:
        fig.add_scatter(x=[s for s, _ in measured], y=[b for _, b in measured], mode="lines+markers", name="measured",
                        line={"color": PALETTE[1]}, hovertemplate="%{x:.3s}B: %{y:.1f} GB/s<extra>measured</extra>")
    styled(fig, "message size (bytes, log scale)", "bus bandwidth (GB/s)")
    fig.update_xaxes(type="log", exponentformat="SI")
    fig.update_yaxes(rangemode="tozero")
    peak = max((b for _, b in expected), default=0.0)
    half = next((s for s, b in expected if b >= peak / 2), None)
    caption = (f"{op} {where}: the model expects up to {peak:.0f} GB/s of bus bandwidth at large messages"
               + (f", half of it from {_bytes(half)}" if half else "") + ". Small messages are latency-bound. ")
    if measured:
        m = dict(measured)
        ratios = [m[s] / b for s, b in expected if s in m and b > 0 and s >= 2**26]
        if ratios:
            r = sum(ratios) / len(ratios)
            caption += (f"Measured reaches {pct(r)} of expected at 64 MB and above: "
                        + ("healthy." if r >= 0.85 else "below 85%, look for a slow link, a wrong NCCL setting "
                                                        "or a congested fabric."))
    else:
        caption += "Run nccl-tests with the same sizes and compare: a healthy cluster is within about 15% at large sizes."
    return Figure("bandwidth", f"Bus bandwidth against message size: {op}", caption, fig)


UNITS = (("_usd", "$"), ("_s", "s"), ("gpu_hours", "GPU-hours"), ("_hours", "h"), ("_h", "h"), ("_bytes", "bytes"), ("_gbps", "GB/s"),
         ("_kw", "kW"), ("_gib", "GiB"), ("tokens_per_s", "tokens/s"))
FRACTIONS = ("mfu", "hfu", "goodput", "allocation", "busy", "ratio", "share", "utilization")


def field_unit(name: str) -> str:
    """The unit a result field's name states (the project's naming convention), else 'count'."""
    last = name.rsplit(".", 1)[-1]
    if any(last == f or last.endswith("_" + f) for f in FRACTIONS):
        return "fraction, 0-1"
    return next((u for suffix, u in UNITS if last.endswith(suffix)), "as the command prints it")


def sweep_field(field: str, labels: Sequence[str], values: Sequence[float]) -> Figure:
    """One kept result field across a sweep's tasks (bar per task, best marked)."""
    g = go()
    unit = field_unit(field)
    lower_better = unit in ("s", "h", "$") or field.endswith("gpu_hours")
    best = (min if lower_better else max)(range(len(values)), key=lambda i: values[i]) if values else None
    fig = g.Figure(g.Bar(x=[label(x) for x in labels], y=list(values),
                         marker_color=[PALETTE[2] if i == best else PALETTE[0] for i in range(len(values))],
                         hovertemplate="%{x}: %{y:.4g}<extra></extra>"))
    styled(fig, "task (the grid's parameters)", f"{label(field)} ({unit})")
    if best is None:
        return Figure(f"sweep-{field}", f"Sweep: {field}", "No task returned this field.", fig)
    lo, hi = min(values), max(values)
    caption = (f"{field} ranges from {lo:.4g} to {hi:.4g} ({unit})"
               + (f", a {hi / lo:.2f}x spread" if lo > 0 else "") + f" across {len(values)} tasks; the "
               f"{'lowest' if lower_better else 'highest'} (green) is {labels[best]}.")
    return Figure(f"sweep-{field}", f"Sweep: {field}", caption, fig)


def _bytes(n: float) -> str:
    for unit, div in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n:g} B"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]
