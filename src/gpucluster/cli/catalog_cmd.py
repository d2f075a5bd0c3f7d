"""`gpucluster catalog [NAME]`: list the hardware catalog, or show one entry with its sources."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from pydantic import BaseModel

from gpucluster.cli.render import console, num, print_json, safe

FAMILIES = ("gpu", "nic", "switch", "cpu", "link")


def catalog(
    name: Annotated[Optional[str], typer.Argument(help="An entry or alias (H100, H100:8, NDR400, QM9700 ...)")] = None,
    kind: Annotated[Optional[str], typer.Option(help=f"Only one family: {', '.join(FAMILIES)}")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """List GPUs, NICs, switches, CPUs and link technologies, or show one entry with sources."""
    from gpucluster.catalog import catalog as cat
    from gpucluster.errors import UserError

    if name:
        family, entry = cat.find(name)
        if json_out:
            print_json({"family": family, **entry.model_dump(mode="json")})
        else:
            _show(family, entry)
        return
    if kind is not None and kind not in FAMILIES:
        raise UserError(f"unknown family {kind!r} (valid: {', '.join(FAMILIES)})", field="--kind")
    families = [kind] if kind else list(FAMILIES)
    if json_out:
        print_json({f: [e.model_dump(mode="json") for _, e in cat.families()[f].items()] for f in families})
        return
    for f in families:
        console.print(_TABLES[f](cat))


def _gpu_table(cat):
    from rich.table import Table
    t = Table(title="GPUs (dense peak, no sparsity)", title_justify="left")
    for col in ("name", "bf16 TFLOP/s", "fp16", "fp8", "fp4", "HBM GiB", "HBM TB/s", "scale-up GB/s/dir",
                "domain", "TDP W", "$/GPU-h"):
        t.add_column(col, justify="left" if col == "name" else "right", no_wrap=col == "name")
    for name, g in cat.gpus.items():
        pk = g.peak_tflops
        rent = g.prices.rental_usd_per_gpu_hour
        t.add_row(safe(name), num(pk["bf16"].value if "bf16" in pk else None, 0),
                  num(pk["fp16"].value if "fp16" in pk else None, 0),   # V100, P100, T4: no bf16
                  num(pk["fp8"].value if "fp8" in pk else None, 0), num(pk["fp4"].value if "fp4" in pk else None, 0),
                  num(g.memory.capacity_gib.value), num(g.memory.bandwidth_tbps.value, 2),
                  num(g.scale_up.bandwidth_gbps_per_direction.value, 0), str(g.domain_size),
                  num(g.tdp_w.value, 0), num(rent.value if rent else None, 2))
    return t


def _nic_table(cat):
    from rich.table import Table
    t = Table(title="NICs and fabrics", title_justify="left")
    for col in ("name", "fabric", "Gbit/s", "GB/s", "link", "W", "$", "aliases"):
        t.add_column(col)
    for name, n in cat.nics.items():
        t.add_row(safe(name), safe(n.fabric), num(n.line_rate_gbit.value, 0), num(n.line_rate_gbit.value / 8, 1),
                  safe(n.link),
                  num(n.power_w.value if n.power_w else None, 0),
                  num(n.price_usd.value if n.price_usd else None, 0), safe(", ".join(n.aliases)))
    return t


def _switch_table(cat):
    from rich.table import Table
    t = Table(title="Switches", title_justify="left")
    for col in ("name", "fabric", "ports", "Gbit/s per port", "Tbit/s", "W", "$", "aliases"):
        t.add_column(col)
    for name, s in cat.switches.items():
        t.add_row(safe(name), safe(s.fabric), num(s.radix.value, 0), num(s.port_gbit.value, 0),
                  num(s.radix.value * s.port_gbit.value / 1000, 1), num(s.power_w.value, 0),
                  num(s.price_usd.value if s.price_usd else None, 0), safe(", ".join(s.aliases)))
    return t


def _cpu_table(cat):
    from rich.table import Table
    t = Table(title="Server CPUs", title_justify="left")
    for col in ("name", "cores", "boost GHz", "FP32 TFLOP/s", "mem GB/s", "TDP W", "$"):
        t.add_column(col)
    for name, c in cat.cpus.items():
        t.add_row(safe(name), num(c.cores.value, 0), num(c.boost_ghz.value, 2), num(c.peak_fp32_tflops.value, 2),
                  num(c.memory_bandwidth_gbps.value, 0), num(c.tdp_w.value, 0),
                  num(c.price_usd.value if c.price_usd else None, 0))
    return t


def _link_table(cat):
    from rich.table import Table
    t = Table(title="Link technologies (collective efficiency, calibrated per technology)", title_justify="left")
    for col in ("name", "kind", "ring eff", "NVLS eff", "hop us", "base us"):
        t.add_column(col)
    for name, link in cat.links.items():
        t.add_row(safe(name), safe(link.kind), num(link.ring.efficiency.value, 2),
                  num(link.in_switch.efficiency.value if link.in_switch else None, 2),
                  num(link.hop_latency_us.value, 1), num(link.base_latency_us.value, 1))
    return t


_TABLES = {"gpu": _gpu_table, "nic": _nic_table, "switch": _switch_table, "cpu": _cpu_table, "link": _link_table}


def _show(family: str, entry) -> None:
    """Every number of one entry, with the source it came from."""
    from rich.table import Table

    from gpucluster.catalog.models import AttentionPoint, GemmPoint, Sourced

    # A catalog copy (GPUCLUSTER_CATALOG, bench --write-calibration) is a user's file: safe().
    t = Table(title=safe(f"{family} {entry.name}" + (f" (aliases: {', '.join(entry.aliases)})" if entry.aliases else "")),
              title_justify="left")
    for col in ("field", "value", "provenance", "source"):
        t.add_column(col)

    def walk(obj, prefix: str) -> None:
        for key, value in obj:
            path = f"{prefix}{key}"
            if isinstance(value, Sourced):
                src = entry.sources[value.source]
                t.add_row(safe(path), f"{value.value:g}", safe(src.kind), safe(f"{src.title} ({src.date})"))
            elif isinstance(value, GemmPoint):
                src = entry.sources[value.source]
                t.add_row(safe(f"{prefix}gemm {value.m}x{value.n}x{value.k} {value.precision}"),
                          f"{value.tflops:g} TFLOP/s", safe(src.kind), safe(f"{src.title} ({src.date})"))
            elif isinstance(value, AttentionPoint):
                src = entry.sources[value.source]
                shape = " ".join(f"{k}={getattr(value, k)}" for k in ("head_dim", "seq_len", "causal")
                                 if getattr(value, k) is not None)
                t.add_row(safe(f"{prefix}attention {value.kernel} {value.direction} {value.precision} {shape}"),
                          f"{value.tflops:g} TFLOP/s", safe(src.kind), safe(f"{src.title} ({src.date})"))
            elif isinstance(value, dict) and key != "sources":
                walk(value.items(), path + ".")
            elif isinstance(value, list) and key != "aliases":
                walk([("", v) for v in value], prefix)
            elif isinstance(value, BaseModel) and key != "sources":
                walk(((k, getattr(value, k)) for k in type(value).model_fields), path + ".")
            elif key not in ("sources", "aliases", "name") and value is not None and not isinstance(value, list):
                t.add_row(safe(path), safe(value), "", "")

    walk(((k, getattr(entry, k)) for k in type(entry).model_fields), "")
    console.print(t)
