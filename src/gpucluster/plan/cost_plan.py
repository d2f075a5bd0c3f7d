"""Cost of a cluster spec: resolve prices (overrides, spec, catalog, prices.yaml), count what
to buy from the topology and facility models, and compare building with renting."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster.catalog import catalog
from gpucluster.catalog.operations import facility_limits, price_book
from gpucluster.errors import UserError
from gpucluster.model.cost import (BuildCost, LineItem, PriceSet, RentOption, break_even_months, energy_usd_per_year,
                                   rent_options)
from gpucluster.model.facility import FacilityReport, facility_report, match_cpu
from gpucluster.model.topology import fabric_of
from gpucluster.specs.cluster import ClusterSpec, NodePool

STORAGE_KEY = {"parallel-fs": "parallel_fs_usd_per_tb", "nfs": "nfs_usd_per_tb", "object": "object_usd_per_tb"}


def base_prices(overrides: dict[str, tuple[float, str]] | None = None) -> PriceSet:
    """prices.yaml with `overrides` {key: (value, origin)} on top; unknown keys are an error."""
    book = price_book()
    values = {k: s.value for k, s in book.numbers().items()}
    origins = {k: f"prices.yaml {book.ref(k)}" for k in values}
    notes = {ref: f"{src.title} ({src.kind}, {src.date})" for ref, src in book.sources.items()}
    for k, (v, origin) in (overrides or {}).items():
        if k not in values:
            from gpucluster.errors import unknown_name
            raise unknown_name("price", k, values, field="--price")
        problem = price_problem(k, v)
        if problem:
            raise UserError(problem, field=origin)
        values[k], origins[k] = v, origin
    return PriceSet(values, origins, notes)


def price_problem(key: str, v: Any) -> str | None:
    """Why `v` cannot be the price or factor `key` (None: it can): a finite number >= 0; a PUE
    (facility power / IT power) >= 1; a `_fraction` at most 1, a utilization above 0."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return f"expected a finite number >= 0, got {v!r}"
    if key == "pue" and v < 1:
        return f"a PUE is facility power / IT power, at least 1, got {v!r}"
    if "_fraction" in key and v > 1:
        return f"a fraction is at most 1, got {v!r}"
    if key == "utilization_fraction" and v == 0:
        return "a utilization of 0 uses no GPU-hours: give a fraction above 0"
    return None


def load_price_file(path: str) -> dict[str, tuple[float, str]]:
    """A YAML mapping of price keys to numbers (or to {value: X})."""
    from gpucluster.specs.loader import load_yaml
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise UserError("expected a mapping of price names to numbers", file=path)
    data = data.get("prices", data)
    out = {}
    for k, given in data.items():
        v: Any = given.get("value") if isinstance(given, dict) else given
        problem = price_problem(str(k), v)
        if problem:
            raise UserError(problem[:200], file=path, line=lines.get(("prices", k), lines.get((k,))), field=str(k))
        out[str(k)] = (float(v), f"{Path(path).name}: {k}")
    return out


def _spec_price(spec: ClusterSpec, pool: NodePool | None, field: str) -> tuple[float, str] | None:
    merged = spec.pool_prices(pool.name) if pool else spec.prices
    v = getattr(merged, field)
    if v is None:
        return None
    if pool is not None and pool.prices is not None and getattr(pool.prices, field) is not None:
        return v, f"cluster spec pool {pool.name} prices.{field}"
    return v, f"cluster spec prices.{field}"


def _catalog_price(entry: Any, attr: str = "price_usd") -> tuple[float, str] | None:
    s = getattr(entry, attr, None)
    if s is None:
        return None
    return s.value, _catalog_src(entry, s.source)


def _need(found: tuple[float, str] | None, what: str, keys: str = "") -> tuple[float, str]:
    if found is None:
        raise UserError(f"no price for {what}: the catalog has none; set it in the cluster spec's prices:"
                        + (f" ({keys})" if keys else ""))
    return found


def _server_items(spec: ClusterSpec, p: NodePool, prices: PriceSet) -> list[LineItem]:
    whole = _spec_price(spec, p, "node_purchase_usd")
    if whole is not None:
        return [LineItem("servers", f"{p.name}: node ({p.gpus_per_node} x {p.gpu}, whole)", p.count, *whole)]
    gpu = p.gpu_entry
    gpu_price = _spec_price(spec, p, "gpu_purchase_usd")
    if gpu_price is None:
        s = gpu.prices.purchase_usd
        gpu_price = _need(None if s is None else (s.value, _catalog_src(gpu, s.source)), f"GPU {gpu.name}",
                          "gpu_purchase_usd or node_purchase_usd")
    cpu, why = match_cpu(p.cpu, p.cpu_cores / p.cpu_sockets)
    cpu_price = _need(_catalog_price(cpu), f"CPU {cpu.name}")
    nic_price = _need(_catalog_price(p.nic_entry), f"NIC {p.nic}")
    items = [
        LineItem("servers", f"{p.name}: GPUs {gpu.name}", p.total_gpus, *gpu_price),
        LineItem("servers", f"{p.name}: CPUs {cpu.name}", p.count * p.cpu_sockets, cpu_price[0],
                 cpu_price[1] + ("" if why.startswith("catalog") else f" ({why})")),
        LineItem("servers", f"{p.name}: DRAM GiB", p.count * p.ram_gib, prices["dram_usd_per_gib"],
                 prices.origin("dram_usd_per_gib")),
        LineItem("servers", f"{p.name}: compute NICs {p.nic}", p.count * p.nics_per_node, *nic_price),
        LineItem("servers", f"{p.name}: server base (chassis, board, PSUs)", p.count, prices["server_base_usd"],
                 prices.origin("server_base_usd")),
    ]
    if p.local_nvme_tb:
        items.append(LineItem("servers", f"{p.name}: local NVMe TB", p.count * p.local_nvme_tb,
                              prices["nvme_usd_per_tb"], prices.origin("nvme_usd_per_tb")))
    if p.storage_nic is not None:
        snic = catalog.nics.get(p.storage_nic.nic)
        items.append(LineItem("servers", f"{p.name}: storage NICs {snic.name}", p.count * p.storage_nic.count,
                               *_need(_catalog_price(snic), f"NIC {snic.name}")))
    return items


def _catalog_src(entry: Any, ref: str) -> str:
    src = entry.sources[ref]
    return f"catalog {entry.name} {ref} ({src.kind}, {src.date}): {src.title}"


def build_cost(spec: ClusterSpec, prices: PriceSet, utilization: float | None = None) -> tuple[BuildCost, FacilityReport]:
    util = prices["utilization_fraction"] if utilization is None else utilization
    fac = facility_report(spec, facility_limits(), prices["host_base_w"], default_pue=prices["pue"])
    tree = fabric_of(spec)
    sw = spec.fabric.switch_entry
    capex: list[LineItem] = []
    for p in spec.node_pools:
        capex += _server_items(spec, p, prices)
    sw_price = _spec_price(spec, None, "switch_purchase_usd") or _need(_catalog_price(sw), f"switch {sw.name}")
    capex.append(LineItem("network", f"switches {sw.name}", tree.switches, *sw_price))
    for key, count, label in (("copper_cable_usd", tree.copper_cables, "node-leaf copper cables"),
                              ("optical_cable_usd", tree.optical_cables, "switch-switch optical cables")):
        price = _spec_price(spec, None, key) or (prices[key], prices.origin(key))
        if count:
            capex.append(LineItem("network", label, count, *price))
    for t in spec.storage:
        if t.kind in STORAGE_KEY:
            k = STORAGE_KEY[t.kind]
            capex.append(LineItem("storage", f"{t.name} ({t.kind}) TB", t.capacity_tb, prices[k], prices.origin(k)))
    racks = sum(r.racks for r in fac.racks)
    capex.append(LineItem("facility", "management node", 1, prices["management_node_usd"],
                          prices.origin("management_node_usd")))
    capex.append(LineItem("facility", "racks with PDUs", racks, prices["rack_usd"], prices.origin("rack_usd")))
    capex.append(LineItem("facility", "cooling capacity kW (IT load)", fac.it_kw, prices["cooling_usd_per_kw"],
                          prices.origin("cooling_usd_per_kw")))
    hardware = sum(i.total_usd for i in capex if i.category in ("servers", "network", "storage"))
    capex.append(LineItem("installation", "rack, cable, burn-in (fraction of hardware)", prices["installation_fraction"],
                          hardware, prices.origin("installation_fraction")))
    gpus = spec.total_gpus
    fac_src = spec.facility
    kwh = (fac_src.usd_per_kwh, "cluster spec facility.usd_per_kwh") if fac_src else (
        prices["usd_per_kwh"], prices.origin("usd_per_kwh"))
    energy = energy_usd_per_year(fac.it_kw, fac.pue, kwh[0], util, prices["idle_power_fraction"])
    software = _spec_price(spec, None, "software_usd_per_gpu_year") or (
        prices["software_usd_per_gpu_year"], prices.origin("software_usd_per_gpu_year"))
    opex = [
        LineItem("power", f"energy: {fac.it_kw:.0f} kW IT x PUE {fac.pue:g} at {util:.0%} utilization",
                 energy / kwh[0], kwh[0], kwh[1]),
        LineItem("staff", "FTE", gpus / prices["gpus_per_fte"], prices["fte_usd_per_year"],
                 f"{prices.origin('fte_usd_per_year')}; {prices['gpus_per_fte']:g} GPUs per FTE: "
                 f"{prices.origin('gpus_per_fte')}"),
        LineItem("software", "licences per GPU", gpus, *software),
        LineItem("maintenance", "support contracts (fraction of hardware)", prices["maintenance_fraction_per_year"],
                 hardware, prices.origin("maintenance_fraction_per_year")),
        LineItem("space", "rack-months", racks * 12, prices["space_usd_per_rack_month"],
                 prices.origin("space_usd_per_rack_month")),
    ]
    assumptions = [
        "prices in today's dollars: no discounting, no resale value, no price changes over the period",
        (f"utilization {util:.0%}: GPU-hours used; energy at idle {prices['idle_power_fraction']:.0%} + the rest "
        "scaled by utilization; rent on demand and spot for the hours used, reserved for every hour"),
        "one management node; racks hold nodes_per_rack GPU nodes each (switch racks not counted)",
    ]
    return BuildCost(gpus, capex, opex, assumptions, prices.notes), fac


@dataclass
class CostPlan:
    cluster: str
    build: BuildCost
    facility: FacilityReport
    rent: list[RentOption]
    years: float
    utilization: float
    prices: PriceSet

    def break_even(self, option: str = "on-demand") -> float:
        r = next(o for o in self.rent if o.name == option)
        return break_even_months(self.build.capex_usd, self.build.opex_usd_per_year, r.usd_per_year(self.build.gpus))


def rental_price(spec: ClusterSpec) -> tuple[float, str]:
    """The spec's usd_per_gpu_hour, else the first pool's GPU catalog rental price."""
    found = _spec_price(spec, spec.node_pools[0], "usd_per_gpu_hour")
    if found:
        return found
    gpu = spec.node_pools[0].gpu_entry
    s = gpu.prices.rental_usd_per_gpu_hour
    if s is None:
        raise UserError(f"no rental price for {gpu.name}; set prices.usd_per_gpu_hour in the cluster spec")
    return s.value, _catalog_src(gpu, s.source)


MAX_YEARS = 100.0


def cost_plan(spec: ClusterSpec, *, overrides: dict[str, tuple[float, str]] | None = None, years: float = 3.0,
              utilization: float | None = None) -> CostPlan:
    if not 0 < years <= MAX_YEARS:          # NaN too; a TCO over 10^19 years (fuzz case 8506) is no answer
        raise UserError(f"must be above 0 and at most {MAX_YEARS:g} years, got {years:g}", field="--years")
    prices = base_prices(overrides)
    util = prices["utilization_fraction"] if utilization is None else utilization
    if not 0 < util <= 1:
        raise UserError(f"must be in (0, 1], got {util}", field="--utilization")
    build, fac = build_cost(spec, prices, util)
    rate, origin = rental_price(spec)
    rents = rent_options(rate, origin, util, prices["reserved_discount_fraction"], prices["spot_discount_fraction"])
    return CostPlan(spec.name, build, fac, rents, years, util, prices)
