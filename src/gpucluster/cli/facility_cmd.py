"""`gpucluster facility`: power per node and rack against the budget, the feed, cooling."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from gpucluster.cli.render import console, num, print_json


def facility(
    cluster: Annotated[str, typer.Argument(help="Cluster spec YAML")],
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """kW per node and per rack, amperes and circuits on the feed, air or liquid cooling."""
    from gpucluster.catalog.operations import facility_limits, price_book
    from gpucluster.model.facility import facility_report
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(cluster)
    book = price_book()
    rep = facility_report(spec, facility_limits(), book.host_base_w.value, default_pue=book.pue.value)
    out: dict[str, Any] = {
        "schema": "gpucluster-facility/v1", "cluster": spec.name, "voltage_v": rep.voltage_v, "phases": rep.phases,
        "it_kw": rep.it_kw, "facility_kw": rep.facility_kw, "pue": rep.pue, "switches_kw": rep.switches_kw,
        "racks": [asdict(r) | {"node_kw": r.node.kw, "over_budget": r.over_budget, "air_too_dense": r.air_too_dense}
                  for r in rep.racks],
        "provenance": list(rep.provenance),
    }
    if json_out:
        print_json(out)
        return
    from rich.table import Table

    feed = f"{rep.voltage_v:g} V {'three' if rep.phases == 3 else 'single'}-phase"
    console.print(f"[bold]{spec.name}[/bold]: {rep.it_kw:.0f} kW IT at full load, {rep.facility_kw:.0f} kW with PUE "
                  f"{rep.pue:g}; feed {feed}" + ("" if spec.facility else " (no facility section: assumed)"))
    t = Table(title="Per pool", title_justify="left")
    for col in ("pool", "node kW", "nodes/rack", "rack kW", "budget kW", "fit/rack", "A per phase", "circuits",
                "at 480 V 3ph", "cooling"):
        t.add_column(col, justify="left" if col in ("pool", "cooling") else "right")
    for r in rep.racks:
        over = "[red]" if r.over_budget else ""
        t.add_row(r.pool, f"{r.node.kw:.2f}", str(r.nodes_per_rack), f"{over}{r.rack_kw:.1f}", num(r.budget_kw, 0),
                  str(r.nodes_that_fit), f"{r.amps_per_phase:.0f}", str(r.circuits), str(r.circuits_at_480v_3ph),
                  r.cooling + (" (over air limit)" if r.air_too_dense else ""))
    console.print(t)
    for r in rep.racks:
        console.print(f"  [dim]{r.pool} node: " + "; ".join(r.node.provenance) + "[/dim]")
    for p in rep.provenance:
        console.print(f"  [dim]{p}[/dim]")
