"""Terminal and JSON output of `gpucluster plan serve`."""

from __future__ import annotations

import math
from typing import Any

from gpucluster.cli.render import console, num, print_json, safe


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf"
    return f"{x * 1e3:,.1f}"


def _shape(o) -> str:
    return "CPU node" if o.hardware[0].isdigit() else f"TP{o.tp} x PP{o.pp}"


def to_json(result, meta: dict[str, Any], sim, spec: Any = None) -> None:
    """`--json`: the gpucluster-plan-serve/v1 document (documents/plan_serve.py)."""
    from gpucluster.documents.plan_serve import build

    print_json(build(result, meta, sim, spec=spec).dump())


def intervals_of(o, meta: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The calibrated intervals of one deployment's figures (plan/confidence.py serving_intervals)."""
    from gpucluster.plan.confidence import serving_intervals

    return serving_intervals(o, meta["rate"], meta["output"], moe=spec is not None and spec.experts > 1,
                             engine=meta.get("engine"))


def _in_out(o, rate: float, inp: int, out: int) -> str:
    m = o.usd_per_mtok_in_out(rate, inp, out)
    if m is not None:
        return f"{m:.3f}"
    own = o.usd_per_mtok_in_out(rate, inp, out, own=True)
    return "-" if own is None else f"own {own:.3f}"


def _range_ms(iv) -> str:
    return "-" if iv is None else f"{_ms(iv.lo)}-{_ms(iv.hi)}"


def hardware_line(recommended: str, meta: dict[str, Any]) -> str:
    """Which hardware the recommendation is on, and whether it was the requested or a compared type."""
    requested = meta.get("requested_hardware")
    compared = [c for c in meta.get("compared", []) if c != recommended]
    others = f"; also compared: {', '.join(compared)}" if compared else ""
    if requested is None or recommended == requested:
        return f"on {safe(recommended)} (requested: {safe(meta['target'])}){safe(others)}"
    return f"on {safe(recommended)} (compared; requested: {safe(meta['target'])}){safe(others)}"


def _checks(result, meta: dict[str, Any]) -> None:
    """--simulate: the discrete-event check of the ranked deployments, cheapest first."""
    checks = getattr(result, "checks", None)
    if checks is None:
        return
    style = "bold" if checks.passed else "bold red"
    console.print(f"[{style}]Discrete-event check[/{style}]: {safe(checks.summary())}")
    for c in checks.checks:
        o = c.option
        mark = "ok  " if c.passed else ("skip" if not c.simulated else "FAIL")
        sim = (f"simulated TTFT/TPOT p99 {_ms(c.sim.ttft_p99)}/{_ms(c.sim.tpot_p99)} ms "
               f"(queueing model {_ms(o.point.ttft_p99)}/{_ms(o.point.tpot_p99)})" if c.simulated else "")
        console.print(f"  {mark} {o.replicas:,} x {safe(o.hardware)} {_shape(o)}: {sim}{'; ' if sim else ''}"
                      f"{safe(c.verdict)}")


def per_hardware_table(result, meta: dict[str, Any]):
    """--compare / --cpu: the cheapest deployment of each hardware type searched."""
    from rich.table import Table

    from gpucluster.plan.serve_search import hardware_names, verdicts

    names = hardware_names(meta, result)
    if len(names) < 2:
        return None
    rate, inp, out = meta["rate"], meta["input"], meta["output"]
    seen = verdicts(result)
    t = Table(title="Best deployment per hardware type (cheapest of each)", title_justify="left")
    for col in ("hardware", "", "shape", "replicas", "GPUs", "TTFT p99 ms", "TPOT p99 ms", "$/hour", "$/Mtok out",
                "$/Mtok in+out", "binds / why none"):
        t.add_column(col, justify="left" if col in ("hardware", "", "shape", "binds / why none") else "right")
    for name, o, why in result.best_per_hardware(names):
        tag = ("recommended" if o is not None and o is result.best else "") + (
            ", requested" if name == meta.get("requested_hardware") else "")
        if o is None:
            t.add_row(safe(name), tag.lstrip(", "), "-", "-", "-", "-", "-", "-", "-", "-", safe(why))
            continue
        m, mio = o.usd_per_mtok(rate, out), o.usd_per_mtok_in_out(rate, inp, out)
        t.add_row(safe(name), tag.lstrip(", "), _shape(o), f"{o.replicas:,}", f"{o.gpus:,}", _ms(o.point.ttft_p99),
                  _ms(o.point.tpot_p99), "-" if o.usd_per_hour is None else num(o.usd_per_hour, 0),
                  "-" if m is None else f"{m:.3f}", "-" if mio is None else f"{mio:.3f}",
                  safe(o.binding) + (f"; sim: {safe(seen[id(o)])}" if id(o) in seen else ""))
    return t


def render(result, meta: dict[str, Any], sim, top: int, spec: Any = None) -> None:
    from rich.table import Table

    rate, out = meta["rate"], meta["output"]
    slo = []
    if meta["slo_ttft_s"]:
        slo.append(f"TTFT p99 <= {meta['slo_ttft_s'] * 1e3:g} ms")
    if meta["slo_tpot_s"]:
        slo.append(f"TPOT p99 <= {meta['slo_tpot_s'] * 1e3:g} ms")
    # The model name and the target (a cluster name and path) come from the user's files: safe().
    console.print(f"[bold]Serving {safe(meta['model'])}[/bold] at {num(rate, 0)} requests/s "
                  f"({meta['input']} prompt + {out} output tokens, {safe(meta['lengths'])} lengths, Poisson arrivals); "
                  f"SLO: {', '.join(slo) or 'none'}; weights {safe(meta['weights'])}, KV cache {safe(meta['kv'])}; "
                  f"{hardware_line(result.best.hardware, meta)}")
    b = result.best
    p = b.point
    nodes = math.ceil(b.gpus / meta["gpus_per_node"])
    console.print()
    console.print(f"[bold]Recommended deployment[/bold]: {b.replicas:,} replica{'s' if b.replicas > 1 else ''} "
                  f"of {safe(b.hardware)} {_shape(b)} = {b.gpus:,} {'sockets' if _shape(b) == 'CPU node' else 'GPUs'}"
                  + (f" ({nodes:,} node{'s' if nodes > 1 else ''} of {meta['gpus_per_node']})"
                     if _shape(b) != "CPU node" else ""))
    console.print(f"  one replica: up to {num(b.per_replica_rate, 2)} requests/s within the SLOs "
                  f"(max batch {b.max_batch}; the KV cache holds {b.memory_batch} sequences"
                  + (f"; weights {b.weights_gib:.1f} GiB per GPU" if b.weights_gib else "") + ")")
    console.print(f"  at {num(p.rate, 2)} requests/s each: mean batch {num(p.batch, 0)}, "
                  f"TTFT p50/p99 {_ms(p.ttft_p50)}/{_ms(p.ttft_p99)} ms, "
                  f"TPOT p50/p99 {_ms(p.tpot_p50)}/{_ms(p.tpot_p99)} ms, prefill {100 * p.prefill_share:.0f}% of the time")
    console.print(f"  throughput: {num(rate * out, 0)} output tokens/s in all")
    iv = intervals_of(b, meta, spec)
    cap = iv["per_replica_rate"]
    console.print(f"  [bold]{100 * cap.level:.0f}% intervals[/bold]: {num(cap.lo, 2)}-{num(cap.hi, 2)} requests/s per "
                  f"replica ({math.ceil(rate / cap.hi):,}-{math.ceil(rate / cap.lo):,} replicas); TTFT p50/p99 "
                  f"{_range_ms(iv.get('ttft_p50_s'))}/{_range_ms(iv.get('ttft_p99_s'))} ms; TPOT p50/p99 "
                  f"{_range_ms(iv.get('tpot_p50_s'))}/{_range_ms(iv.get('tpot_p99_s'))} ms")
    console.print(f"  [dim]regime: {safe(cap.regime)}; throughput from {safe(cap.basis)}"
                  + (f"; TTFT from {safe(iv['ttft_p50_s'].basis)}" if "ttft_p50_s" in iv else "")
                  + (f"; TPOT from {safe(iv['tpot_p50_s'].basis)}" if "tpot_p50_s" in iv else "") + "[/dim]")
    mtok = b.usd_per_mtok(rate, out)
    own = b.usd_per_mtok(rate, out, own=True)

    def band(key: str) -> str:
        return f" [dim]({100 * iv[key].level:.0f}%: ${iv[key].lo:.3f}-${iv[key].hi:.3f})[/dim]" if key in iv else ""

    inp = meta["input"]
    mio, own_io = b.usd_per_mtok_in_out(rate, inp, out), b.usd_per_mtok_in_out(rate, inp, out, own=True)
    if mtok is not None:
        console.print(f"  cost: ${num(b.usd_per_hour, 0)}/hour rented, ${mtok:.3f} per million output tokens"
                      + band("usd_per_mtok")
                      + (f" (owned, processors over 3 years: ${own:.3f}{band('own_usd_per_mtok')})" if own is not None else ""))
    elif own is not None:
        console.print(f"  cost: ${own:.3f}{band('own_usd_per_mtok')} per million output tokens owned (processors over "
                      "3 years; no rental price)")
    if mio is not None or own_io is not None:
        what = f"${mio:.3f} rented" if mio is not None else f"${own_io:.3f} owned"
        console.print(f"  or {what} per million input + output tokens [dim]($/hour / (rate x ({inp} + {out}) tokens "
                      f"x 3600) x 1e6; output only: $/hour / (rate x {out} tokens x 3600) x 1e6)[/dim]")
    if b.price_source:
        console.print(f"  [dim]price: {safe(b.price_source)}[/dim]")
    console.print(f"[bold]Binding constraint[/bold]: {safe(b.binding)}"
                  + (f" [dim](the replica stops at {safe(b.limit)})[/dim]" if b.limit == "capacity" else ""))
    console.print(f"  [dim]serving efficiency {b.efficiency[0]:g}: {safe(b.efficiency[1])}[/dim]")
    _checks(result, meta)
    if sim is not None:
        console.print(f"  recommended replica ({sim.requests} requests simulated): "
                      f"TTFT p50/p99 {_ms(sim.ttft_p50)}/{_ms(sim.ttft_p99)} ms, "
                      f"TPOT p50/p99 {_ms(sim.tpot_p50)}/{_ms(sim.tpot_p99)} ms, mean batch {num(sim.mean_batch, 0)}")

    t = Table(title=f"Top {min(top, len(result.options))} of {len(result.options)} deployments "
                    "(cheapest first; without a price, fewest GPUs first)",
              title_justify="left")
    for col in ("hardware", "shape", "replicas", "GPUs", "max batch", "req/s per replica", "out tok/s per replica",
                "TTFT p50/p99 ms", "TPOT p50/p99 ms", "$/Mtok", f"{100 * cap.level:.0f}% $/Mtok", "$/Mtok in+out",
                "binds"):
        t.add_column(col, justify="left" if col in ("hardware", "shape", "binds") else "right")
    key = "usd_per_mtok" if "usd_per_mtok" in iv else "own_usd_per_mtok"
    ties = 0
    for i, o in enumerate(result.options[:top]):
        q = o.point
        m = o.usd_per_mtok(rate, out)
        cost = f"{m:.3f}" if m is not None else (f"own {o.usd_per_mtok(rate, out, own=True):.3f}"
                                                 if o.own_usd_per_hour is not None else "-")
        oi = intervals_of(o, meta, spec).get(key if m is not None else "own_usd_per_mtok")
        tie = i > 0 and oi is not None and key in iv and (iv[key].contains(oi.point) or oi.contains(iv[key].point))
        ties += tie
        t.add_row(safe(o.hardware), _shape(o), f"{o.replicas:,}", f"{o.gpus:,}", str(o.max_batch), num(o.per_replica_rate, 2),
                  num(q.tokens_per_s, 0), f"{_ms(q.ttft_p50)}/{_ms(q.ttft_p99)}", f"{_ms(q.tpot_p50)}/{_ms(q.tpot_p99)}",
                  cost, "-" if oi is None else f"{oi.lo:.3f}-{oi.hi:.3f}" + (" ≈#1" if tie else ""),
                  _in_out(o, rate, meta["input"], out), safe(o.binding))
    console.print()
    console.print(t)
    if ties:
        console.print(f"  [yellow]{ties} alternative{'s' if ties > 1 else ''} marked ≈#1 cost within the recommended "
                      f"deployment's {100 * cap.level:.0f}% interval[/yellow]: the model's accuracy cannot rank them")
    per = per_hardware_table(result, meta)
    if per is not None:
        console.print(per)
    if result.rejected:
        shown = "; ".join(f"{r.hardware} TP{r.tp}xPP{r.pp}: {r.reason} ({r.detail})" for r in result.rejected[:6])
        more = f" and {len(result.rejected) - 6} more" if len(result.rejected) > 6 else ""
        console.print(f"[dim]Not possible: {safe(shown)}{more}[/dim]")
    if meta.get("nodes") and _shape(b) != "CPU node" and b.gpus > meta["nodes"] * meta["gpus_per_node"]:
        console.print(f"[yellow]The recommended deployment needs {b.gpus:,} GPUs; the {meta['nodes']} nodes given "
                      f"hold {meta['nodes'] * meta['gpus_per_node']:,}.[/yellow]")
