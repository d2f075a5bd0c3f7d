"""`gpucluster advise`: one GPU, one node, a cluster or CPUs; build or rent, with the numbers."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.render import console, num, print_json, safe

# Without --deadline the answer would be "the smallest thing that fits", however many years it
# takes. No large pre-training run published by the labs took much over three months (Llama 3
# 405B: 54 days on 16,384 H100, Dubey et al. 2024), so the ladder stops at the first rung that
# trains in 90 days, and says that this deadline was assumed.
DEFAULT_DEADLINE_S = 90 * 86400.0
DEFAULT_DEADLINE_WHY = "assumed: give --deadline; about the longest published pre-training run (Llama 3 405B: 54 days)"


def advise(
    model: Annotated[str, typer.Option(help="Model to train (preset or YAML)")],
    tokens: Annotated[Optional[str], typer.Option(help="Tokens to train on (default: 20 per parameter)")] = None,
    deadline: Annotated[Optional[str], typer.Option(
        help="Wanted time to train, e.g. 24h, 30d (default: 90 days, an assumption the answer states)")] = None,
    gpu: Annotated[str, typer.Option(help="GPU type")] = "H200",
    nic: Annotated[str, typer.Option(help="NIC, one per GPU")] = "NDR400",
    cpu: Annotated[str, typer.Option(help="CPU node to compare, TYPE:SOCKETS")] = "EPYC-9654:2",
    months: Annotated[Optional[float], typer.Option(help="Months you will use the cluster (default: this run)")] = None,
    utilization: Annotated[Optional[float], typer.Option(help="Fraction of hours the cluster is busy")] = None,
    rate: Annotated[Optional[str], typer.Option(help="Also serve the model at this many requests/s")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Answer the seeds' decision framework for your workload from the planners and the cost model."""
    from dataclasses import asdict

    from gpucluster.errors import UserError
    from gpucluster.plan.decide import build_or_rent, default_tokens, ladder
    from gpucluster.units import format_duration
    from gpucluster.specs.durations import parse_duration
    from gpucluster.specs.workload import load_model_spec
    from gpucluster.units import parse_count

    from gpucluster.api_args import Real, shown

    # Every option checked before the ladder runs (it plans several clusters).
    for flag, value, rule in (("--months", months, Real(0, 1200, above=True, unit=" months")),
                              ("--utilization", utilization, Real(0, 1, above=True))):
        if value is not None and rule.check(value) is not None:
            raise UserError(f"must be {rule.what}, got {shown(value)}", field=flag)
    if rate:
        from gpucluster.plan.serve_request import parse_rate
        parse_rate(rate[:100])          # > 0 and <= 1e7 requests/s: 1e308 is refused with the range
    spec = load_model_spec(model)
    try:
        tok = parse_count(tokens) if tokens else None
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc)[:200], field="--tokens") from None
    if tok is not None and not 1 <= tok <= 10**18:
        raise UserError(f"must be from 1 to 1e18 tokens, got {str(tokens)[:60]!r}", field="--tokens")
    try:
        deadline_s = parse_duration(deadline, "h") if deadline else DEFAULT_DEADLINE_S
    except ValueError as exc:
        raise UserError(str(exc), field="--deadline") from None
    if not 0 < deadline_s < float("inf"):
        raise UserError(f"must be a positive duration, got {deadline!r}", field="--deadline")
    deadline_source = "given" if deadline else DEFAULT_DEADLINE_WHY
    cname, _, sockets = cpu.partition(":")
    if sockets and (not sockets.isdigit() or len(sockets) > 3 or not 1 <= int(sockets) <= 64):
        raise UserError(f"sockets must be an integer from 1 to 64, got {sockets[:20]!r}", field="--cpu")
    rungs, answer = ladder(spec, gpu, nic, tok, deadline_s, (cname, int(sockets or 2)))
    budget = tok or default_tokens(spec)
    tokens_source = "given" if tok else "Chinchilla: 20 tokens per active parameter (Hoffmann et al. 2022)"
    out: dict[str, Any] = {"schema": "gpucluster-advise/v1", "model": spec.name, "tokens": budget,
                           "tokens_source": tokens_source, "deadline_s": deadline_s,
                           "deadline_source": deadline_source,
                           "rungs": [asdict(r) for r in rungs], "answer": answer.label if answer else None}
    bor = None
    if answer is not None:
        bor = build_or_rent(answer, gpu, nic, months, utilization)
        out["build_or_rent"] = {k: v for k, v in asdict(bor).items() if k != "rung"}
    serving = _serving(spec, gpu, nic, cname, int(sockets or 2), rate) if rate else None
    if serving:
        out["serving"] = serving
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("advise", out))
        return
    console.print(f"  tokens: {budget / 1e9:,.0f}B ({tokens_source}); deadline: {format_duration(deadline_s)} "
                  f"({safe(deadline_source)})")
    _render(spec, rungs, answer, bor, deadline_s, serving)


def _serving(spec, gpu: str, nic: str, cpu: str, sockets: int, rate_text: str) -> dict[str, Any]:
    from gpucluster.catalog import catalog
    from gpucluster.plan.serve_request import parse_rate
    from gpucluster.model.serving.queueing import Lengths, Traffic
    from gpucluster.plan.fabric_from import from_flags
    from gpucluster.plan.serve_search import search

    rate = parse_rate(rate_text[:100])
    traffic = Traffic(rate, Lengths(512.0, "fixed"), Lengths(256.0, "fixed"))
    res = search(spec, [from_flags(f"{gpu}:8", 8, nic, None).fabric], rate, traffic,
                 cpus=[(catalog.cpus.get(cpu), sockets)])
    out: dict[str, Any] = {"rate": rate, "input_tokens": 512, "output_tokens": 256}
    for kind, pick in (("gpu", lambda o: "x" not in o.hardware), ("cpu", lambda o: " x " in o.hardware)):
        o = next((o for o in res.options if pick(o)), None)
        if o is not None:
            out[kind] = {"hardware": o.hardware, "replicas": o.replicas, "processors": o.gpus,
                         "usd_per_mtok_rented": o.usd_per_mtok(rate, 256), "usd_per_mtok_owned": o.usd_per_mtok(
                             rate, 256, own=True), "ttft_p99_s": o.point.ttft_p99}
    return out


def _print_assumptions(rungs) -> None:
    """The training times rest on what the plan could not check on this GPU: say so once."""
    notes = list(dict.fromkeys(a for r in rungs for a in r.assumptions))
    if not notes:
        return
    console.print("  [yellow]The times to train are assumed, not validated:[/yellow]")
    for a in notes:
        console.print(f"  [dim]- {safe(a)}[/dim]")


def _render(spec, rungs, answer, bor, deadline_s, serving) -> None:
    from rich.table import Table

    from gpucluster.units import format_duration

    t = Table(title=f"Where {safe(spec.name)} trains" + (f" (deadline {format_duration(deadline_s)})" if deadline_s else ""),
              title_justify="left")
    for col in ("option", "fits", "time to train", "failure every", "GPU-hours", "layout / why not"):
        t.add_column(col, justify="right" if col in ("time to train", "failure every", "GPU-hours") else "left",
                     overflow="fold")
    for r in rungs:
        ok = "yes" if r.fits else "no"
        if r.meets_deadline is not None and r.fits:
            ok += ", in time" if r.meets_deadline else ", too slow"
        t.add_row(safe(r.label), ok, format_duration(r.time_s) if r.time_s else "-",
                  format_duration(r.mtbf_s) if r.mtbf_s else "-", num(r.gpu_hours, 0) if r.gpu_hours else "-",
                  safe(r.layout or r.reason[:200]))
    console.print(t)
    console.print("  [dim]time to train without failures (training planner); failure every: MTBF of a job that size "
                  "(Llama 3 rates, `gpucluster reliability`)[/dim]")
    _print_assumptions(rungs)
    if answer is None:
        console.print("[bold]Answer[/bold]: nothing on the ladder fits and meets the deadline; a longer deadline, "
                      "faster GPUs or a smaller model")
        return
    kind = ("one GPU" if answer.gpus == 1 else f"one node ({answer.gpus} GPUs)" if answer.nodes == 1 else
            f"a cluster ({answer.nodes} nodes, {answer.gpus} GPUs)")
    console.print(f"[bold]Answer[/bold]: {kind}, the smallest option that fits the model and meets the deadline")
    b = bor
    console.print(f"[bold]Build or rent[/bold]: [bold]{safe(b.answer)}[/bold]. Renting this run costs "
                  f"${num(b.run_rent_usd, 0)} at ${b.rent_usd_per_gpu_hour:.2f}/GPU-hour; building costs "
                  f"${num(b.capex_usd, 0)} up front + ${num(b.opex_usd_per_month, 0)} a month and pays back after "
                  + ("never (renting costs less than operating)" if b.break_even_months == float("inf") else
                     f"{b.break_even_months:.1f} months") + f" at {b.utilization:.0%} utilization; over "
                  f"{format_duration(b.horizon_months * 30.44 * 86400)}: build ${num(b.build_total_usd, 0)}, "
                  f"rent ${num(b.rent_total_usd, 0)}")
    for a in b.assumptions:
        console.print(f"  [dim]- {safe(a)}[/dim]")
    if serving:
        for kind in ("gpu", "cpu"):
            o = serving.get(kind)
            if o:
                rented = f"${o['usd_per_mtok_rented']:.3f} rented, " if o["usd_per_mtok_rented"] is not None else ""
                owned = f"${o['usd_per_mtok_owned']:.3f}" if o["usd_per_mtok_owned"] is not None else "-"
                console.print(f"[bold]Serving[/bold] {num(serving['rate'], 0)} req/s on {kind.upper()}s: "
                              f"{o['replicas']} x {safe(o['hardware'])} replica(s), {o['processors']} processors; "
                              f"{rented}{owned} owned (processors only) per million output tokens")
