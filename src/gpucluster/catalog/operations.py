"""Operating data with sources: failure profiles, prices and facility limits.

Three data files sit next to the hardware catalog (`data/failures.yaml`,
`data/prices.yaml`, `data/facility.yaml`), each with a file-wide `sources:` map
that every `{value, source}` number cites, as in the hardware files. They are
loaded once, on first use (the packaged ones kept validated between runs: catalog/cache.py),
and reported with file and line when malformed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from gpucluster.catalog.cache import cached
from gpucluster.catalog.models import Entry, Source, Sourced, Strict
from gpucluster.errors import UserError
from gpucluster.registry import Registry

DATA_DIR = Path(__file__).parent / "data"


class FailureCause(Strict):
    name: str
    component: str = Field(description="gpu, hbm, gpu-sram, sdc, network, nic, host or software")
    per: Literal["gpu", "node"] = Field(description="what the rate scales with")
    hardware: bool = Field(description="true: the node goes out for repair")
    count: Sourced = Field(description="interruptions observed over the profile's exposure")


class FailureProfile(Entry):
    """Interruptions one operator observed, by cause, over `gpus` x `days`."""
    description: str
    gpus: Sourced
    gpus_per_node: Sourced
    days: Sourced
    planned: Sourced | None = Field(None, description="planned interruptions (not modelled as failures)")
    causes: list[FailureCause] = Field(min_length=1)

    @property
    def hours(self) -> float:
        return self.days.value * 24

    @property
    def nodes(self) -> float:
        return self.gpus.value / self.gpus_per_node.value

    def source_text(self, ref: str) -> str:
        s = self.sources[ref]
        return f"{s.title} ({s.date})"


class Operations(Strict):
    restart_overhead_s: Sourced = Field(description="detect, drain, reschedule and restart (without the checkpoint read)")
    watchdog_timeout_s: Sourced
    node_repair_h: Sourced = Field(description="a failed node is out this long")


class _Book(Strict):
    """A flat set of sourced numbers; `describe(name)` names the source of one."""
    sources: dict[str, Source]

    def numbers(self) -> dict[str, Sourced]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, Sourced)}

    def describe(self, name: str) -> str:
        src = self.sources[getattr(self, name).source]
        return f"{src.title} ({src.kind}, {src.date})"

    def ref(self, name: str) -> str:
        """Short citation of one number: `source-id (kind, date)`."""
        ref = getattr(self, name).source
        src = self.sources[ref]
        return f"{ref} ({src.kind}, {src.date})"


class PriceBook(_Book):
    server_base_usd: Sourced = Field(description="8-GPU server without GPUs, CPUs, DRAM, NVMe and NICs")
    management_node_usd: Sourced
    dram_usd_per_gib: Sourced
    nvme_usd_per_tb: Sourced
    copper_cable_usd: Sourced
    optical_cable_usd: Sourced
    parallel_fs_usd_per_tb: Sourced
    nfs_usd_per_tb: Sourced
    object_usd_per_tb: Sourced
    rack_usd: Sourced
    installation_fraction: Sourced
    cooling_usd_per_kw: Sourced
    maintenance_fraction_per_year: Sourced
    space_usd_per_rack_month: Sourced
    fte_usd_per_year: Sourced
    gpus_per_fte: Sourced
    software_usd_per_gpu_year: Sourced
    usd_per_kwh: Sourced
    pue: Sourced
    idle_power_fraction: Sourced
    host_base_w: Sourced
    reserved_discount_fraction: Sourced
    spot_discount_fraction: Sourced
    utilization_fraction: Sourced


class FacilityLimits(_Book):
    standard_rack_kw: Sourced
    air_cooling_max_kw_per_rack: Sourced
    circuit_a: Sourced
    continuous_load_fraction: Sourced
    power_factor: Sourced
    bytes_per_token_large_vocab: Sourced
    bytes_per_token_small_vocab: Sourced
    vision_input_gbps_per_gpu: Sourced


def _section(path: Path, key: str) -> tuple[dict, dict, dict]:
    from gpucluster.specs.loader import load_yaml

    data, lines = load_yaml(path)
    if not isinstance(data, dict) or key not in data or "sources" not in data:
        raise UserError(f"expected a mapping with `sources:` and `{key}:`", file=str(path))
    return data, lines, data["sources"]


@cache
def failure_profiles(path: Path = DATA_DIR / "failures.yaml") -> Registry[FailureProfile]:
    return cached("failure-profiles", [path], lambda: _read_failure_profiles(path))


def _read_failure_profiles(path: Path) -> Registry[FailureProfile]:
    from gpucluster.specs.loader import parse_data

    data, lines, sources = _section(path, "profiles")
    reg: Registry[FailureProfile] = Registry("failure profile")
    for i, raw in enumerate(data["profiles"]):
        if not isinstance(raw, dict):
            raise UserError("each profile must be a mapping", file=str(path), field=f"profiles[{i}]")
        prof = parse_data(FailureProfile, {**raw, "sources": sources}, str(path), lines,
                          prefix=("profiles", i), context={"sources": sources})
        reg.add(prof.name, prof, prof.aliases)
    return reg


@cache
def operations(path: Path = DATA_DIR / "failures.yaml") -> tuple[Operations, dict[str, Source]]:
    return cached("operations", [path], lambda: _read_operations(path))


def _read_operations(path: Path) -> tuple[Operations, dict[str, Source]]:
    from gpucluster.specs.loader import parse_data

    data, lines, sources = _section(path, "operations")
    ops = parse_data(Operations, data["operations"], str(path), lines, prefix=("operations",),
                     context={"sources": sources})
    return ops, parse_data(_Book, {"sources": sources}, str(path), lines).sources


@cache
def price_book(path: Path = DATA_DIR / "prices.yaml") -> PriceBook:
    return cached("prices", [path], lambda: _read_price_book(path))


def _read_price_book(path: Path) -> PriceBook:
    from gpucluster.specs.loader import parse_data

    data, lines, sources = _section(path, "prices")
    return parse_data(PriceBook, {**data["prices"], "sources": sources}, str(path), lines,
                      prefix=("prices",), context={"sources": sources})


@cache
def facility_limits(path: Path = DATA_DIR / "facility.yaml") -> FacilityLimits:
    return cached("facility", [path], lambda: _read_facility_limits(path))


def _read_facility_limits(path: Path) -> FacilityLimits:
    from gpucluster.specs.loader import parse_data

    data, lines, sources = _section(path, "limits")
    return parse_data(FacilityLimits, {**data["limits"], "sources": sources}, str(path), lines,
                      prefix=("limits",), context={"sources": sources})
