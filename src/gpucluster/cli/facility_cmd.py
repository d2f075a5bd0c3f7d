"""`gpucluster facility`: power per node and rack against the budget, the feed, cooling."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, NodesOpt, SwitchOpt
from gpucluster.cli.render import console, num, print_json, safe


def facility(
    cluster: Annotated[Optional[str], typer.Argument(help="Cluster spec YAML (or --gpu, --nodes, --nic)")] = None,
    gpu: GpuOpt = None,
    nodes: NodesOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    model: Annotated[Optional[str], typer.Option(help="Also size storage for training this model: input "
                                                      "read rate and checkpoint bursts per tier")] = None,
    input_gbps_per_gpu: Annotated[Optional[float], typer.Option(help="Input GB/s per GPU (images, video) "
                                                                     "instead of token ids; a finite number >= 0")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """kW per node and per rack, amperes and circuits on the feed, air or liquid cooling; with
    --model, what storage must deliver to feed the GPUs and absorb checkpoints, tier by tier."""
    from gpucluster.catalog.operations import facility_limits, price_book
    from gpucluster.cli.cluster_options import finite_in, path_of, resolve
    from gpucluster.model.facility import facility_report

    finite_in(input_gbps_per_gpu, "--input-gbps-per-gpu", 0.0)
    choice = resolve(cluster, gpu, nodes, nic, nics_per_node, switch)
    spec = choice.spec
    book = price_book()
    rep = facility_report(spec, facility_limits(), book.host_base_w.value, default_pue=book.pue.value)
    out: dict[str, Any] = {
        "schema": "gpucluster-facility/v1", "cluster": spec.name, "voltage_v": rep.voltage_v, "phases": rep.phases,
        "it_kw": rep.it_kw, "facility_kw": rep.facility_kw, "pue": rep.pue, "switches_kw": rep.switches_kw,
        "racks": [asdict(r) | {"node_kw": r.node.kw, "over_budget": r.over_budget, "air_too_dense": r.air_too_dense}
                  for r in rep.racks],
        "provenance": list(rep.provenance),
    }
    if model is not None:
        out["storage"] = storage_needs(path_of(choice), spec, model, input_gbps_per_gpu)
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("facility", out))
        return
    from rich.table import Table

    feed = f"{rep.voltage_v:g} V {'three' if rep.phases == 3 else 'single'}-phase"
    console.print(f"[bold]{safe(spec.name)}[/bold]: {rep.it_kw:.0f} kW IT at full load, {rep.facility_kw:.0f} kW with PUE "
                  f"{rep.pue:g}; feed {feed}" + ("" if spec.facility else " (no facility section: assumed)"))
    t = Table(title="Per pool", title_justify="left")
    for col in ("pool", "node kW", "nodes/rack", "rack kW", "budget kW", "fit/rack", "A per phase", "circuits",
                "at 480 V 3ph", "cooling"):
        t.add_column(col, justify="left" if col in ("pool", "cooling") else "right")
    for r in rep.racks:
        over = "[red]" if r.over_budget else ""
        t.add_row(safe(r.pool), f"{r.node.kw:.2f}", str(r.nodes_per_rack), f"{over}{r.rack_kw:.1f}", num(r.budget_kw, 0),
                  str(r.nodes_that_fit), f"{r.amps_per_phase:.0f}", str(r.circuits), str(r.circuits_at_480v_3ph),
                  safe(r.cooling) + (" (over air limit)" if r.air_too_dense else ""))
    console.print(t)
    for r in rep.racks:
        console.print(f"  [dim]{safe(r.pool)} node: " + safe("; ".join(r.node.provenance)) + "[/dim]")
    for p in rep.provenance:
        console.print(f"  [dim]{safe(p)}[/dim]")
    if "storage" in out:
        st = out["storage"]
        s = Table(title=f"Storage for {safe(st['model'])} on {st['gpus']} GPUs: input {st['input_gbps']:.3g} GB/s "
                        f"({safe(st['input_basis'])}); checkpoint {st['checkpoint_tb']:.2f} TB", title_justify="left")
        for col in ("tier", "kind", "read GB/s", "write GB/s", "input share of read", "checkpoint write",
                    "Daly interval", "write share of interval"):
            s.add_column(col, justify="left" if col in ("tier", "kind") else "right")
        for t in st["tiers"]:
            s.add_row(safe(t["tier"]), safe(t["kind"]), num(t["read_gbps"], 0), num(t["write_gbps"], 0),
                      f"{t['input_share']:.2%}", f"{t['checkpoint_write_s']:.1f} s",
                      f"{t['daly_interval_s'] / 60:.1f} min" if t["daly_interval_s"] else "-",
                      f"{t['write_share']:.2%}" if t["write_share"] is not None else "-")
        console.print(s)
        console.print("  [dim]local NVMe: per-node figures x nodes; shared tiers: capped by the nodes' storage "
                      "links; the Daly interval uses the Llama 3 failure rates for this many GPUs[/dim]")


def storage_needs(path: str, spec, model_name: str, input_gbps_per_gpu: float | None) -> dict[str, Any]:
    """Training input and checkpoint bursts against each tier's read and write bandwidth."""
    from gpucluster.catalog.operations import facility_limits
    from gpucluster.model.checkpoint import checkpoint_size, node_storage_gbps, transfer_s
    from gpucluster.model.facility import bytes_per_token
    from gpucluster.model.reliability import daly_interval
    from gpucluster.plan.fabric_from import from_cluster
    from gpucluster.plan.reliability_plan import load_failure_model
    from gpucluster.plan.run_estimates import train
    from gpucluster.specs.workload import load_model_spec

    m = load_model_spec(model_name)
    pool = spec.node_pools[0]
    nodes, gpus = pool.count, pool.total_gpus
    if input_gbps_per_gpu is not None:
        need, basis = gpus * input_gbps_per_gpu, f"{input_gbps_per_gpu:g} GB/s per GPU, given"
    else:
        plan = train(m, from_cluster(path, pool.name))
        tb = bytes_per_token(m.vocab, facility_limits())
        need = plan.best.tokens_per_s * tb / 1e9
        basis = f"{plan.best.tokens_per_s:,.0f} tokens/s x {tb:g} bytes"
    size = checkpoint_size(m).total_bytes
    link, _ = node_storage_gbps(pool)
    mtbf = load_failure_model().mtbf_hours(gpus, pool.gpus_per_node) * 3600
    tiers = []
    for t in spec.storage:
        local = t.kind == "local-nvme"
        read = t.read_gbps * nodes if local else min(t.read_gbps, nodes * link)
        write = t.write_gbps * nodes if local else min(t.write_gbps, nodes * link)
        w, _ = transfer_s(size, t, nodes, link, write=True)
        tau = daly_interval(w, mtbf)
        tiers.append({"tier": t.name, "kind": t.kind, "read_gbps": read, "write_gbps": write,
                      "input_share": need / read, "checkpoint_write_s": w, "daly_interval_s": tau,
                      "write_share": w / (tau + w)})
    return {"model": m.name, "gpus": gpus, "input_gbps": need, "input_basis": basis,
            "checkpoint_tb": size / 1e12, "mtbf_s": mtbf, "tiers": tiers}
