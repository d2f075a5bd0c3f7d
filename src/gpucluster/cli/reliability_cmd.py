"""`gpucluster reliability`: MTBF by job size, checkpoint tier and interval, goodput, spare nodes."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, SwitchOpt
from gpucluster.cli.render import console, num, print_json, safe

DEFAULT_GPUS = (8, 64, 256, 1024, 2048, 8000, 16384, 80000)


MAX_INTERVAL_S = 10 * 365 * 86400.0
MAX_GPUS = 10_000_000


def reliability(
    cluster: Annotated[Optional[str], typer.Argument(
        help="Cluster spec YAML, or --gpu, --nodes, --nic (omit both for an MTBF table only)")] = None,
    gpu: GpuOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    model: Annotated[str, typer.Option(help="Model whose checkpoints are saved (preset or YAML)")] = "llama3-70b",
    profile: Annotated[str, typer.Option(help="Failure data: llama3, opt-175b, bloom-176b or seed")] = "llama3",
    pool: Annotated[Optional[str], typer.Option(help="Node pool (default: the first)")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Nodes the job uses (default: the whole pool); with --gpu, "
                                                      "the cluster's nodes too (default 1)")] = None,
    interval: Annotated[Optional[str], typer.Option(help="Your checkpoint interval, e.g. 30m, to compare")] = None,
    gpus: Annotated[Optional[list[int]], typer.Option(help="GPU counts for the MTBF table")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """How often a job fails at its size, how often to checkpoint, and what failures cost."""
    from gpucluster.errors import UserError
    from gpucluster.plan.reliability_plan import load_failure_model, seed_claims
    from gpucluster.specs.durations import parse_duration

    fm = load_failure_model(profile)
    counts = list(gpus or DEFAULT_GPUS)
    if any(not 1 <= g <= MAX_GPUS for g in counts):     # 2^63 GPUs gave an MTBF of 0.0 s (fuzz case 10942)
        raise UserError(f"GPU counts must be from 1 to {MAX_GPUS:,}", field="--gpus")
    try:
        interval_s = parse_duration(interval, "m") if interval else None
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc), field="--interval") from None
    if interval_s is not None and not 0 < interval_s <= MAX_INTERVAL_S:
        raise UserError(f"a checkpoint interval is above 0 and at most 10 years, got {interval!r}"[:200],
                        field="--interval")
    table = [{"gpus": g, "nodes": -(-g // 8), "mtbf_h": fm.mtbf_hours(g, 8)} for g in counts]
    claims = [{"nodes": c.nodes, "seed_mtbf_h": c.claimed_mtbf_h, "model_mtbf_h": c.model_mtbf_h,
               "seed_says_more_often_by": c.ratio} for c in seed_claims(fm)]
    out: dict[str, Any] = {"schema": "gpucluster-reliability/v1", "profile": fm.profile,
                           "description": fm.description, "mtbf_by_gpus": table, "seed_claims": claims,
                           "causes": [{"name": c.name, "component": c.component, "per": c.per,
                                       "rate_per_unit_hour": c.rate_per_unit_hour, "source": c.source}
                                      for c in fm.causes]}
    plan = None
    if cluster is not None or gpu is not None or nic != DEFAULT_NIC or nics_per_node is not None or switch is not None:
        from gpucluster.cli.cluster_options import resolve
        from gpucluster.plan.reliability_plan import reliability_plan
        from gpucluster.specs.workload import load_model_spec

        choice = resolve(cluster, gpu, nodes, nic, nics_per_node, switch, nodes_with_file=True)
        plan = reliability_plan(choice.spec, load_model_spec(model), profile=profile, pool=pool,
                                nodes=nodes, interval_s=interval_s)
        out["job"] = _job(plan)
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("reliability", out))
    else:
        _render(fm, out, plan)
    if html:
        from gpucluster.report.ops_report import write_reliability_report
        from gpucluster.documents import parse
        write_reliability_report(fm, parse("reliability", out), plan, html)


def _job(plan) -> dict[str, Any]:
    opts = []
    for o in plan.options:
        row = {"tier": o.option.name, "write_s": o.option.delta_s, "copy_s": o.option.copy_s,
               "read_s": o.option.read_s, "durable": o.option.durable, "limit": o.option.limit,
               "young_s": o.young_s, "daly_s": o.optimal.interval_s,
               "lost_work_per_failure_s": o.optimal.lost_work_per_failure_s, "goodput": o.optimal.goodput}
        if o.given is not None:
            row |= {"given_interval_s": o.given.interval_s, "given_goodput": o.given.goodput,
                    "given_lost_work_per_failure_s": o.given.lost_work_per_failure_s}
        opts.append(row)
    return {"cluster": plan.cluster, "model": plan.model, "gpus": plan.gpus, "nodes": plan.nodes,
            "interruptions_per_day": plan.rate_per_hour * 24, "mtbf_s": plan.mtbf_s,
            "by_component_per_day": {k: v * 24 for k, v in plan.failures.by_component(plan.gpus, plan.gpus_per_node).items()},
            "checkpoint_bytes": plan.size.total_bytes, "options": opts, "best": plan.best.option.name,
            "spares": {"nodes_down_mean": plan.spares.nodes_down_mean, "spare_nodes": plan.spares.spares,
                       "quantile": plan.spares.quantile, "repair_h": plan.spares.repair_h},
            "assumptions": plan.assumptions}


def _render(fm, out: dict[str, Any], plan) -> None:
    from rich.table import Table

    from gpucluster.units import format_duration

    console.print(f"[bold]Failure profile {safe(fm.profile)}[/bold]: {safe(fm.description)}")
    t = Table(title="Time between job interruptions by job size (8 GPUs per node)", title_justify="left")
    for col in ("GPUs", "nodes", "MTBF"):
        t.add_column(col, justify="right")
    for r in out["mtbf_by_gpus"]:
        t.add_row(num(r["gpus"], 0), num(r["nodes"], 0), format_duration(r["mtbf_h"] * 3600))
    console.print(t)
    c = Table(title="The seed's claims against this profile", title_justify="left")
    for col in ("nodes", "seed says", f"{safe(fm.profile)} gives", "seed: failures more often by"):
        c.add_column(col, justify="right")
    for r in out["seed_claims"]:
        c.add_row(num(r["nodes"], 0), format_duration(r["seed_mtbf_h"] * 3600),
                  format_duration(r["model_mtbf_h"] * 3600), f"{r['seed_says_more_often_by']:.1f}x")
    console.print(c)
    if plan is None:
        return
    j = out["job"]
    console.print(f"\n[bold]{safe(j['cluster'])}[/bold]: {safe(j['model'])} on {j['gpus']} GPUs ({j['nodes']} nodes): "
                  f"{j['interruptions_per_day']:.2f} interruptions a day, one every {format_duration(j['mtbf_s'])}")
    comp = ", ".join(f"{k} {v:.3f}" for k, v in j["by_component_per_day"].items())
    console.print(f"  by component, per day: {safe(comp)}")
    console.print(f"  checkpoint: {j['checkpoint_bytes'] / 1e12:.2f} TB (weights + optimizer state)")
    given = any("given_interval_s" in o for o in j["options"])
    o = Table(title="Checkpoint tiers (intervals: Young 1974, Daly 2006 eq. 37; goodput: Daly's wall-clock model)",
              title_justify="left")
    cols = ["tier", "write", "async copy", "read", "Young", "Daly", "lost per failure", "goodput"]
    if given:
        cols += ["goodput at yours", "lost at yours"]
    for col in cols:
        o.add_column(col, justify="left" if col == "tier" else "right")
    for r in j["options"]:
        row = [safe(r["tier"]) + ("" if r["durable"] else " (not durable)"), format_duration(r["write_s"]),
               format_duration(r["copy_s"]) if r["copy_s"] else "-", format_duration(r["read_s"]),
               format_duration(r["young_s"]), format_duration(r["daly_s"]),
               format_duration(r["lost_work_per_failure_s"]), f"{r['goodput']:.2%}"]
        if given:
            row += [f"{r['given_goodput']:.2%}", format_duration(r["given_lost_work_per_failure_s"])]
        o.add_row(*row)
    console.print(o)
    best = next(r for r in j["options"] if r["tier"] == j["best"])
    console.print(f"[bold]Best[/bold]: checkpoint to {safe(j['best'])} every {format_duration(best['daly_s'])}: "
                  f"goodput {best['goodput']:.2%}, {format_duration(best['lost_work_per_failure_s'])} lost per failure "
                  f"(restart included)")
    s = j["spares"]
    console.print(f"[bold]Spares[/bold]: {s['nodes_down_mean']:.2f} nodes out for repair on average; keep "
                  f"{s['spare_nodes']} spare node(s) ({s['quantile']:.0%} of the time enough)")
    for a in j["assumptions"]:
        console.print(f"  [dim]- {safe(a)}[/dim]")
