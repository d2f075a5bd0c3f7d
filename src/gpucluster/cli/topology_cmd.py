"""`gpucluster topology`: what the fabric of a cluster spec delivers, tier by tier."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, NodesOpt, SwitchOpt, resolve
from gpucluster.cli.render import console, num, print_json, safe


def topology(
    cluster: Annotated[Optional[str], typer.Option(help="Cluster spec YAML (or --gpu, --nodes, --nic)")] = None,
    gpu: GpuOpt = None,
    nodes: NodesOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Per-GPU bandwidth and latency per tier, switches and cables, bisection bandwidth."""
    from rich.table import Table

    from gpucluster.model.topology import ASSUMPTIONS, bisection, tiers
    spec = resolve(cluster, gpu, nodes, nic, nics_per_node, switch).spec
    bis = bisection(spec)
    tree = bis.tree
    per_pool = {p.name: tiers(spec, p.name) for p in spec.node_pools}
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("topology", {
            "schema": "gpucluster-topology/v1", "cluster": spec.name, "nodes": spec.total_nodes,
            "gpus": spec.total_gpus,
            "tiers": {pool: {k: asdict(t) for k, t in ts.items()} for pool, ts in per_pool.items()},
            "fabric": {k: v for k, v in asdict(tree).items() if k != "groups"}
            | {"switches": tree.switches, "copper_cables": tree.copper_cables,
               "optical_cables": tree.optical_cables, "cables": tree.cables},
            "bisection": {"delivered_gbps": bis.delivered_gbps, "target_gbps": bis.target_gbps,
                          "ratio": bis.ratio, "provenance": list(bis.provenance)},
        }))
        return

    # Names come from the spec file: every one goes through safe() (rich markup, control bytes).
    pools = ", ".join(f"{p.count} x {p.gpus_per_node} {p.gpu}" for p in spec.node_pools)
    console.print(f"[bold]{safe(spec.name)}[/bold]: {spec.total_nodes} nodes, {spec.total_gpus} GPUs ({safe(pools)})")
    for pool, ts in per_pool.items():
        t = Table(title=f"Per-GPU bandwidth by tier, pool {safe(pool)}", title_justify="left")
        for col in ("", "tier", "GB/s per direction", "latency us", "link"):
            t.add_column(col, justify="right" if col in ("GB/s per direction", "latency us") else "left")
        for i, tier in enumerate(ts.values(), 1):
            t.add_row(f"\\[{i}]", safe(tier.name), num(tier.gbps_per_direction, 1), num(tier.latency_us, 1),
                      safe(tier.link or "-"))
        console.print(t)
        for i, tier in enumerate(ts.values(), 1):
            console.print(f"  [dim]\\[{i}] {safe(tier.provenance)}[/dim]")
    f = Table(title=f"Fabric: {safe(spec.fabric.topology)}, {tree.levels} level(s) of {safe(spec.fabric.switch)} "
                    f"({tree.switch_radix} ports), {tree.oversubscription:g}:1", title_justify="left")
    f.add_column("item")
    f.add_column("count", justify="right")
    for label, value in (("endpoints (NIC ports)", tree.endpoints), ("leaf switches", tree.leaf_switches),
                         ("spine switches", tree.spine_switches), ("core switches", tree.core_switches),
                         ("switches in all", tree.switches), ("node-leaf cables (copper)", tree.copper_cables),
                         ("switch-switch cables (optical)", tree.optical_cables),
                         ("largest cluster this design holds (endpoints)", tree.max_endpoints)):
        f.add_row(label, f"{value:,}")
    console.print(f)
    console.print(f"Bisection bandwidth: {num(bis.delivered_gbps / 1000, 1)} TB/s delivered vs "
                  f"{num(bis.target_gbps / 1000, 1)} TB/s seed target "
                  f"(nodes/2 x GPUs per node x NVLink GB/s / 4): {100 * bis.ratio:.0f}%")
    for line in bis.provenance:
        console.print(f"  [dim]{safe(line)}[/dim]")
    for line in ASSUMPTIONS:
        console.print(f"  [dim]assumption: {safe(line)}[/dim]")
