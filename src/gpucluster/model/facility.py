"""Facility: power per node and per rack, the electrical feed, cooling, and storage feeds.

Power at full load. A node whose GPU and count match a vendor system in
facility.yaml `systems` draws that system's rated maximum (DGX H100 and H200
10.2 kW, DGX B200 14.3 kW, DGX A100 6.5 kW, 8 x MI300X platform 10.6 kW
estimated): the sum of TDPs below misses the NVSwitches, fans and PSU losses at
full load, and gave 7.5 kW for an 8 x H200 node, so 3 nodes "fit" a 30 kW rack
where the vendor's 3 x 10.2 = 30.6 kW does not. Any other node is an estimate
from its parts: its GPUs' TDP, its CPUs' TDP (catalog CPU matched by name, else
the catalog CPU closest in cores per socket), its NICs' power, and a host
remainder (fans, DRAM, NVMe, baseboard, PSU losses: `host_base_w` in
prices.yaml, an estimate). Seed 1: "each node pulls 7.2kW" for 8 x H200 + CPUs,
a typical draw, not the maximum a rack must be provisioned for.

Feed. The current a rack draws per phase is P / (V * pf) on a single-phase feed
and P / (sqrt(3) * V * pf) on a three-phase feed (V line-to-line). A branch circuit
carries a continuous load up to 80% of its rating (NEC 210.19(A)/210.20(A)), so a
circuit of A amperes delivers V * A * 0.8 * pf (x sqrt(3) for three phases) watts.
At 208 V single-phase, 30 A, that is 4.7 kW: one 8-GPU node needs two circuits and
a 30 kW rack seven; at 480 V three-phase one 30 A circuit gives 19 kW.

Storage feed: training reads its input at GPUs x tokens/s per GPU x bytes per
token (token ids: 2 bytes below a 65,500 vocabulary, 4 above, as Megatron's
indexed datasets store them); image workloads read ~0.3 GB/s per GPU (estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, PositiveInt

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Source, Sourced, Strict

if TYPE_CHECKING:
    from gpucluster.catalog.models import Cpu
    from gpucluster.catalog.operations import FacilityLimits
    from gpucluster.specs.cluster import ClusterSpec, NodePool

SQRT3 = math.sqrt(3)


def match_cpu(name: str | None, cores_per_socket: float) -> tuple[Cpu, str]:
    """The catalog CPU a pool's free-text `cpu` names, else the one closest in cores per socket."""
    if name:
        words = name.strip().split()
        for cand in ("-".join(words), "-".join(words[1:])):
            if cand and cand in catalog.cpus:
                cpu = catalog.cpus.get(cand)
                return cpu, f"catalog CPU {cpu.name}"
    cpu = min((c for _, c in catalog.cpus.items()), key=lambda c: abs(c.cores.value - cores_per_socket))
    why = f"CPU {name!r} is not in the catalog" if name else "no CPU named"
    return cpu, f"{why}; assumed {cpu.name} (closest in cores per socket)"


class SystemMax(Strict):
    """A vendor's whole-system maximum power for a GPU model and count."""
    name: str
    gpu: str = Field(description="catalog GPU name")
    gpus: PositiveInt
    max_kw: Sourced


class _SystemBook(Strict):
    sources: dict[str, Source]
    systems: list[SystemMax] = Field(default_factory=list)


@cache
def system_book(path: Path | None = None) -> _SystemBook:
    """facility.yaml `systems`, checked (sources defined, GPUs in the catalog) on first use."""
    from gpucluster.catalog.operations import DATA_DIR
    from gpucluster.errors import UserError
    from gpucluster.specs.loader import load_yaml, parse_data

    path = path or DATA_DIR / "facility.yaml"
    data, lines = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
        raise UserError("expected a mapping with `sources:`", file=str(path))
    book = parse_data(_SystemBook, {"sources": data["sources"], "systems": data.get("systems") or []}, str(path),
                      lines, context={"sources": data["sources"]})
    for i, s in enumerate(book.systems):
        if s.gpu not in catalog.gpus:
            raise UserError(f"unknown catalog GPU {s.gpu!r}", file=str(path), line=lines.get(("systems", i, "gpu")),
                            field=f"systems[{i}].gpu")
    return book


def vendor_system(gpu_name: str, gpus: int) -> tuple[SystemMax, Source] | None:
    """The vendor system with this GPU and count, and the source of its maximum; None if none."""
    book = system_book()
    canonical = catalog.gpus.canonical(gpu_name) if gpu_name in catalog.gpus else gpu_name
    for s in book.systems:
        if s.gpus == gpus and catalog.gpus.canonical(s.gpu) == canonical:
            return s, book.sources[s.max_kw.source]
    return None


@dataclass(frozen=True)
class NodePower:
    gpus_w: float                   # the parts, always computed (what the node is made of)
    cpus_w: float
    nics_w: float
    host_base_w: float
    provenance: tuple[str, ...]
    system: str | None = None       # the vendor system whose rated maximum applies
    system_w: float | None = None   # that maximum, watts
    estimate: bool = True           # True: summed from parts (or a vendor figure marked as an estimate)

    @property
    def parts_w(self) -> float:
        return self.gpus_w + self.cpus_w + self.nics_w + self.host_base_w

    @property
    def total_w(self) -> float:
        """Full-load draw: the vendor's system maximum where one applies, else the parts' sum."""
        return self.system_w if self.system_w is not None else self.parts_w

    @property
    def kw(self) -> float:
        return self.total_w / 1000


def node_power(pool: NodePool, host_base_w: float) -> NodePower:
    gpu = pool.gpu_entry
    cpu, cpu_why = match_cpu(pool.cpu, pool.cpu_cores / pool.cpu_sockets)
    nic = pool.nic_entry
    nic_w = pool.nics_per_node * (nic.power_w.value if nic.power_w else 0.0)
    prov = [f"GPUs: {pool.gpus_per_node} x {gpu.name}.tdp_w {gpu.tdp_w.value:g} W",
            f"CPUs: {pool.cpu_sockets} x {cpu.tdp_w.value:g} W TDP ({cpu_why})",
            f"NICs: {pool.nics_per_node} x {nic.name}.power_w {nic.power_w.value if nic.power_w else 0:g} W"]
    if pool.storage_nic is not None:
        snic = catalog.nics.get(pool.storage_nic.nic)
        w = snic.power_w.value if snic.power_w else 0.0
        nic_w += pool.storage_nic.count * w
        prov.append(f"storage NICs: {pool.storage_nic.count} x {snic.name}.power_w {w:g} W")
    prov.append(f"host remainder {host_base_w:g} W (fans, DRAM, NVMe, baseboard, PSU losses)")
    parts = (pool.gpus_per_node * gpu.tdp_w.value, pool.cpu_sockets * cpu.tdp_w.value, nic_w, host_base_w)
    found = vendor_system(gpu.name, pool.gpus_per_node)
    if found is None:
        prov.insert(0, f"estimate: {sum(parts) / 1000:.2f} kW summed from the parts below (no vendor system "
                       f"maximum for {pool.gpus_per_node} x {gpu.name} in facility.yaml)")
        return NodePower(*parts, tuple(prov))
    system, src = found
    cite = f"{system.max_kw.source}, {src.kind}, {src.date}" + (f", {src.url}" if src.url else "")
    prov.insert(0, f"{system.name} maximum {system.max_kw.value:g} kW"
                   + (" (an estimate" if src.kind == "estimate" else " (vendor rating") + f": {cite}); summed from the "
                   f"parts below it would be {sum(parts) / 1000:.2f} kW, short of what the vendor provisions for")
    return NodePower(*parts, tuple(prov), system.name, system.max_kw.value * 1000, src.kind == "estimate")


def feed_current_a(kw: float, voltage_v: float, phases: int, power_factor: float) -> float:
    """Amperes per phase for `kw` at `voltage_v` (line-to-line for three phases)."""
    return kw * 1000 / ((SQRT3 if phases == 3 else 1.0) * voltage_v * power_factor)


def circuit_kw(voltage_v: float, phases: int, circuit_a: float, continuous: float, power_factor: float) -> float:
    """Continuous kW one branch circuit of `circuit_a` amperes delivers."""
    return (SQRT3 if phases == 3 else 1.0) * voltage_v * circuit_a * continuous * power_factor / 1000


@dataclass(frozen=True)
class RackReport:
    pool: str
    node: NodePower
    nodes_per_rack: int
    racks: int
    rack_kw: float
    budget_kw: float
    nodes_that_fit: int            # per rack within the budget
    amps_per_phase: float
    circuit_kw: float
    circuits: int                  # branch circuits a rack needs on this feed
    circuits_at_480v_3ph: int      # the same rack on 480 V three-phase, for comparison
    cooling: str
    air_limit_kw: float

    @property
    def over_budget(self) -> bool:
        return self.rack_kw > self.budget_kw

    @property
    def air_too_dense(self) -> bool:
        return self.cooling == "air" and self.rack_kw > self.air_limit_kw


@dataclass(frozen=True)
class FacilityReport:
    racks: list[RackReport]
    switches_kw: float
    it_kw: float                   # all nodes + switches at full load
    facility_kw: float             # it_kw x PUE
    pue: float
    voltage_v: float
    phases: int
    provenance: tuple[str, ...]


def facility_report(spec: ClusterSpec, limits: FacilityLimits, host_base_w: float,
                    default_pue: float = 1.0) -> FacilityReport:
    """Rack power, feed and cooling per pool; IT and facility load for the whole cluster.
    Without a `facility:` section the rack is taken to hold one node, on 480 V three-phase."""
    from gpucluster.model.topology import fabric_of

    fac = spec.facility
    pf, cont, amps = limits.power_factor.value, limits.continuous_load_fraction.value, limits.circuit_a.value
    volts, phases = (fac.voltage_v, fac.phases) if fac else (480.0, 3)
    racks = []
    for p in spec.node_pools:
        npw = node_power(p, host_base_w)
        per_rack = min(fac.nodes_per_rack if fac else 1, p.count)
        rack_kw = npw.kw * per_rack
        budget = fac.rack_kw_budget if fac else math.inf
        cap = circuit_kw(volts, phases, amps, cont, pf)
        racks.append(RackReport(
            p.name, npw, per_rack, math.ceil(p.count / per_rack), rack_kw, budget,
            int(budget // npw.kw) if math.isfinite(budget) else per_rack,
            feed_current_a(rack_kw, volts, phases, pf), cap, math.ceil(rack_kw / cap - 1e-9),
            math.ceil(rack_kw / circuit_kw(480, 3, amps, cont, pf) - 1e-9),
            fac.cooling if fac else "air", limits.air_cooling_max_kw_per_rack.value))
    tree = fabric_of(spec)
    sw = spec.fabric.switch_entry
    switches_kw = tree.switches * sw.power_w.value / 1000
    it = sum(r.node.kw * n.count for r, n in zip(racks, spec.node_pools, strict=True)) + switches_kw
    pue = fac.pue if fac else default_pue
    prov = (f"switches: {tree.switches} x {sw.name}.power_w {sw.power_w.value:g} W (without optics)",
            (f"circuit: {amps:g} A, loaded to {cont:.0%} ({limits.describe('continuous_load_fraction')}), "
            f"power factor {pf:g}"),
            (f"air cooling up to {limits.air_cooling_max_kw_per_rack.value:g} kW per rack "
            f"({limits.describe('air_cooling_max_kw_per_rack')})"))
    return FacilityReport(racks, switches_kw, it, it * pue, pue, volts, phases, prov)


def bytes_per_token(vocab: int, limits: FacilityLimits) -> float:
    return (limits.bytes_per_token_small_vocab if vocab < 65500 else limits.bytes_per_token_large_vocab).value


def input_gbps(gpus: int, tokens_per_s_per_gpu: float, token_bytes: float) -> float:
    """GB/s of training input the GPUs consume."""
    return gpus * tokens_per_s_per_gpu * token_bytes / 1e9
