"""`gpucluster cost`: build against rent, break-even month, TCO, a training run, tokens served."""

from __future__ import annotations

import math
from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, NodesOpt, SwitchOpt
from gpucluster.cli.render import console, num, print_json, safe


def parse_price_flags(flags: list[str] | None, files: list[str] | None) -> dict[str, tuple[float, str]]:
    from gpucluster.errors import UserError
    from gpucluster.plan.cost_plan import load_price_file

    out: dict[str, tuple[float, str]] = {}
    for f in files or []:
        out.update(load_price_file(f))
    for flag in flags or []:
        key, sep, value = flag.partition("=")
        try:
            v = float(value) if sep else -1.0
        except ValueError:
            v = -1.0
        if not 0 <= v < math.inf:                  # NaN and inf too: a TCO of NaN is no answer
            raise UserError(f"expected key=number >= 0, got {flag!r}", field="--price")
        out[key.strip()] = (v, f"--price {key.strip()}")
    return out


def cost(
    cluster: Annotated[Optional[str], typer.Argument(help="Cluster spec YAML (or --gpu, --nodes, --nic)")] = None,
    gpu: GpuOpt = None,
    nodes: NodesOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    years: Annotated[float, typer.Option(help="TCO period in years")] = 3.0,
    utilization: Annotated[Optional[float], typer.Option(help="Fraction of GPU-hours used (default from prices.yaml)")] = None,
    price: Annotated[Optional[list[str]], typer.Option(help="Override a price, e.g. fte_usd_per_year=150000")] = None,
    prices: Annotated[Optional[list[str]], typer.Option(help="YAML file of price overrides")] = None,
    model: Annotated[Optional[str], typer.Option(help="Cost one training run of this model (preset or YAML)")] = None,
    tokens: Annotated[Optional[str], typer.Option(help="Tokens for the run (default: 20 per parameter)")] = None,
    serve_tokens_per_s: Annotated[Optional[float], typer.Option(
        help="Serving throughput, tokens/s, for $ per million tokens; a finite number > 0")] = None,
    serve_gpus: Annotated[Optional[int], typer.Option(
        help="GPUs that serve --serve-tokens-per-s, >= 1 (default: one node)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """What the cluster costs to build and run, against renting it; break-even month and TCO."""
    from gpucluster.errors import UserError
    from gpucluster.model.cost import build_usd_per_gpu_hour, usd_per_million_tokens
    from gpucluster.cli.cluster_options import finite_in, path_of, resolve
    from gpucluster.plan.cost_plan import cost_plan

    # checked before any work: NaN passed `<= 0` and --serve-gpus 0 fell back to one node
    finite_in(serve_tokens_per_s, "--serve-tokens-per-s", 0.0, lo_open=True)
    if serve_gpus is not None and not 1 <= serve_gpus <= 10_000_000:
        raise UserError(f"must be from 1 to 10,000,000, got {serve_gpus}", field="--serve-gpus")
    choice = resolve(cluster, gpu, nodes, nic, nics_per_node, switch)
    spec = choice.spec
    plan = cost_plan(spec, overrides=parse_price_flags(price, prices), years=years, utilization=utilization)
    b = plan.build
    own_rate = build_usd_per_gpu_hour(b, years, plan.utilization)
    out: dict[str, Any] = {
        "schema": "gpucluster-cost/v1", "cluster": spec.name, "gpus": b.gpus, "years": years,
        "utilization": plan.utilization,
        "capex_usd": b.capex_usd, "opex_usd_per_year": b.opex_usd_per_year, "tco_usd": b.tco_usd(years),
        "build_usd_per_gpu_hour_used": own_rate,
        "capex": [_item(i) for i in b.capex], "opex_per_year": [_item(i) for i in b.opex_per_year],
        "rent": [{"option": r.name, "usd_per_gpu_hour": r.usd_per_gpu_hour, "usd_per_year": r.usd_per_year(b.gpus),
                  "tco_usd": r.usd_per_year(b.gpus) * years, "break_even_months": _finite(plan.break_even(r.name)),
                  "origin": r.origin} for r in plan.rent],
        "it_kw": plan.facility.it_kw, "assumptions": b.assumptions,
    }
    run = None
    if model is not None:
        run = _run(path_of(choice), spec, model, tokens)
        on_demand = plan.rent[0].usd_per_gpu_hour
        out["training_run"] = {
            "model": run.training.spec.name, "tokens": run.training.tokens, "gpu_hours": run.training.gpu_hours,
            "goodput": run.goodput, "wall_s": run.wall_s, "rent_usd": run.cost_usd(on_demand),
            "build_usd": run.cost_usd(own_rate)}
    if serve_tokens_per_s is not None:
        gpus = serve_gpus if serve_gpus is not None else spec.node_pools[0].gpus_per_node
        out["serving"] = {"gpus": gpus, "tokens_per_s": serve_tokens_per_s,
                          "rent_usd_per_million_tokens": usd_per_million_tokens(plan.rent[0].usd_per_gpu_hour, gpus,
                                                                                serve_tokens_per_s),
                          "build_usd_per_million_tokens": usd_per_million_tokens(own_rate, gpus, serve_tokens_per_s)}
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("cost", out))
    else:
        _render(plan, out)
    if html:
        from gpucluster.report.ops_report import write_cost_report
        from gpucluster.documents import parse
        write_cost_report(plan, parse("cost", out), html)


def _q(x: float) -> str:
    if not math.isfinite(x):                     # an infinite price from a price file prints as is
        return num(x, 0)
    return num(x, 0) if x == int(x) or x >= 100 else num(x, 2)


def _finite(x: float) -> float | None:
    return None if x == float("inf") else x


def _item(i) -> dict[str, Any]:
    return {"category": i.category, "name": i.name, "quantity": i.quantity, "unit_usd": i.unit_usd,
            "total_usd": i.total_usd, "origin": i.origin}


def _run(path: str, spec, model: str, tokens: str | None):
    from gpucluster.errors import UserError
    from gpucluster.plan.fabric_from import from_cluster
    from gpucluster.plan.run_estimates import estimate_run
    from gpucluster.specs.workload import load_model_spec
    from gpucluster.units import parse_count

    m = load_model_spec(model)
    try:
        budget = parse_count(tokens) if tokens else None
    except ValueError as exc:
        raise UserError(str(exc), field="--tokens") from None
    return estimate_run(spec, from_cluster(path), m, budget)


def _render(plan, out: dict[str, Any]) -> None:
    from rich.table import Table

    from gpucluster.units import format_duration

    b = plan.build
    console.print(f"[bold]{safe(out['cluster'])}[/bold]: {b.gpus} GPUs, {out['it_kw']:.0f} kW IT load; "
                  f"{out['years']:g}-year view at {plan.utilization:.0%} utilization")
    for title, items in (("Build: capital", b.capex), ("Build: operating, per year", b.opex_per_year)):
        t = Table(title=title, title_justify="left")
        for col in ("category", "item", "quantity", "unit $", "total $", "price from"):
            t.add_column(col, justify="right" if col in ("quantity", "unit $", "total $") else "left",
                         overflow="fold", max_width=70 if col == "price from" else None)
        for i in items:
            # item names and origins can come from a price file or a --price flag
            t.add_row(safe(i.category), safe(i.name), _q(i.quantity), _q(i.unit_usd), num(i.total_usd, 0),
                      safe(i.origin))
        t.add_row("[bold]total[/bold]", "", "", "", f"[bold]{num(sum(x.total_usd for x in items), 0)}[/bold]", "")
        console.print(t)
    r = Table(title=f"Build or rent, {out['years']:g} years", title_justify="left")
    for col in ("option", "$/GPU-hour", "$ per year", f"{out['years']:g}-year total $", "break-even month", "price from"):
        r.add_column(col, justify="left" if col in ("option", "price from") else "right", overflow="fold",
                     max_width=60 if col == "price from" else None)
    r.add_row("build", num(out["build_usd_per_gpu_hour_used"], 2), num(b.opex_usd_per_year, 0),
              num(out["tco_usd"], 0), "", f"capital {num(b.capex_usd, 0)} + operating; per GPU-hour used")
    for x in out["rent"]:
        be = x["break_even_months"]
        r.add_row(f"rent {safe(x['option'])}", num(x["usd_per_gpu_hour"], 2), num(x["usd_per_year"], 0),
                  num(x["tco_usd"], 0), "never" if be is None else f"{be:.1f}", safe(x["origin"]))
    console.print(r)
    if "training_run" in out:
        tr = out["training_run"]
        console.print(f"[bold]Training run[/bold] {safe(tr['model'])}, {tr['tokens']:.3g} tokens: "
                      f"{num(tr['gpu_hours'], 0)} GPU-hours of compute, goodput {tr['goodput']:.1%} "
                      f"(checkpoints, failures, restarts) -> {format_duration(tr['wall_s'])} wall clock; "
                      f"rent on demand ${num(tr['rent_usd'], 0)}, on the built cluster ${num(tr['build_usd'], 0)}")
    if "serving" in out:
        s = out["serving"]
        console.print(f"[bold]Serving[/bold] {num(s['tokens_per_s'], 0)} tokens/s on {s['gpus']} GPUs: "
                      f"${s['rent_usd_per_million_tokens']:.3f} per million tokens rented, "
                      f"${s['build_usd_per_million_tokens']:.3f} built")
    for a in b.assumptions:
        console.print(f"  [dim]- {safe(a)}[/dim]")
    cited = [ref for ref in b.notes if any(f"prices.yaml {ref} (" in i.origin or f": prices.yaml {ref} (" in i.origin
                                            for i in (*b.capex, *b.opex_per_year))]
    if cited:
        console.print("[bold]Sources[/bold] (prices.yaml):")
        for ref in cited:
            console.print(f"  [dim]{safe(ref)}: {safe(b.notes[ref])}[/dim]")
