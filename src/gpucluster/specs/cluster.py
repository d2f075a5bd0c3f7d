"""The cluster spec: node pools, fabric, storage tiers, facility and price overrides.

A user writes one YAML file per cluster (see `examples/`); `load_cluster` turns it
into a frozen `ClusterSpec` or raises one `UserError` line `file:line: field: reason`.

Units are in the field names: `_gib` = 2**30 bytes, `_tb` = 1e12 bytes, `_gbps` =
GB/s = 1e9 bytes/s, `_gbit` = Gbit/s line rate, `_kw` = kilowatts, `_v` = volts,
`_ms` = milliseconds, `_usd` = US dollars.

GPU, NIC and switch names are checked against the catalog and stored in their
canonical spelling (an alias such as `H100` becomes `H100-SXM5-80GB`), so a
loaded spec dumps to a file that loads back to an equal spec.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, field_validator,
                      model_validator)

from gpucluster.api_args import ONE_PATH, checked
from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu, Nic, Switch
from gpucluster.errors import UserError, unknown_name
from gpucluster.registry import Registry
from gpucluster.specs.loader import load_model

# A catalog scale-up domain larger than one baseboard (HGX/OAM boards hold 8 GPUs)
# is a rack-scale domain (NVL36, NVL72) whose NVLink spans several nodes.
BOARD_GPUS = 8

_ACCEL = re.compile(r"^\s*([^:\s]+)\s*:\s*(\S+)\s*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _canonical(reg: Registry, name: str) -> str:
    """The registry's canonical name; its 'unknown name' error (which lists the
    valid names and suggests close ones) becomes a ValueError for pydantic."""
    try:
        return reg.canonical(name)
    except UserError as exc:
        raise ValueError(exc.reason) from None


class StorageNic(Strict):
    """NICs of a separate storage network (not used by collectives)."""
    nic: str = Field(description="catalog NIC name, e.g. RoCE-200G")
    count: int = Field(ge=1, le=1024, description="storage NICs per node")

    @field_validator("nic")
    @classmethod
    def _nic_known(cls, v: str) -> str:
        return _canonical(catalog.nics, v)


class Prices(Strict):
    """Optional price overrides; anything left out comes from the catalog's price data.

    Set on the cluster (applies to every pool) or on one pool (wins over the cluster's)."""
    usd_per_gpu_hour: float | None = Field(None, ge=0, description="rental price, USD per GPU-hour")
    gpu_purchase_usd: float | None = Field(None, ge=0, description="purchase price of one GPU, USD")
    node_purchase_usd: float | None = Field(
        None, ge=0, description="purchase price of one whole node (GPUs, CPUs, RAM, NVMe, NICs), USD")
    switch_purchase_usd: float | None = Field(None, ge=0, description="purchase price of one fabric switch, USD")
    optical_cable_usd: float | None = Field(None, ge=0, description="one active optical cable or transceiver pair, USD")
    copper_cable_usd: float | None = Field(None, ge=0, description="one copper DAC cable, USD")
    software_usd_per_gpu_year: float | None = Field(
        None, ge=0, description="software licences per GPU per year (e.g. NVIDIA AI Enterprise), USD")

    def merged_over(self, base: Prices) -> Prices:
        """These overrides on top of `base` (fields set here win)."""
        data = base.model_dump()
        data.update({k: v for k, v in self.model_dump().items() if v is not None})
        return Prices(**data)


def _with_power_cap(data: Any) -> Any:
    """`power_cap_w: 500` on a pool of H100 means the catalog GPU `H100@500W` (catalog/registry.py)."""
    if not isinstance(data, dict) or data.get("power_cap_w") is None or not isinstance(data.get("gpu"), str):
        return data
    cap = data["power_cap_w"]
    if not isinstance(cap, int | float) or isinstance(cap, bool) or cap <= 0:
        return data  # the field's own check reports it
    gpu = data["gpu"]
    if "@" in gpu:
        _, _, written = gpu.partition("@")
        try:
            same = float(written.strip().rstrip("wW")) == float(cap)
        except ValueError:
            same = False
        if not same:
            raise ValueError(f"gpu {gpu!r} names a power cap that differs from power_cap_w ({cap:g} W)")
        return data
    return {**data, "gpu": f"{gpu}@{float(cap):g}W"}


class NodePool(Strict):
    """A group of identical nodes."""
    name: str = Field(min_length=1, description="unique pool name, e.g. h100")
    count: int = Field(ge=1, le=1_000_000, description="number of nodes in the pool")
    gpu: str = Field(description="catalog GPU name (H100-SXM5-80GB, or an alias such as H100); "
                                 "SkyPilot form TYPE:COUNT (H100:8) also sets gpus_per_node")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs per node (may be omitted when gpu is TYPE:COUNT)")
    scale_up_domain: int | None = Field(
        None, ge=1, description="override of the scale-up (NVLink) domain size in GPUs, e.g. 72 for "
                                "GB200 NVL72 racks; default: the catalog's domain, capped at gpus_per_node "
                                "unless the catalog domain is rack-scale (more than 8 GPUs)")
    cpu: str | None = Field(None, description="CPU model name per socket, e.g. AMD EPYC 9654 (free text)")
    cpu_sockets: int = Field(1, ge=1, le=64, description="CPU sockets per node")
    cpu_cores: int = Field(ge=1, le=1_000_000, description="CPU cores per node, all sockets together")
    ram_gib: float = Field(gt=0, description="host RAM per node, GiB")
    local_nvme_tb: float = Field(0.0, ge=0, description="local NVMe capacity per node, TB (1e12 bytes)")
    nics_per_node: int = Field(ge=1, le=1024, description="compute-fabric NICs (ports) per node")
    nic: str = Field(description="catalog NIC name of the compute fabric, e.g. NDR400")
    rail_optimized: bool = Field(
        False, description="NIC i of every node goes to the leaf of rail i (NVIDIA DGX SuperPOD wiring)")
    storage_nic: StorageNic | None = Field(None, description="separate storage-network NICs, if any")
    prices: Prices | None = Field(None, description="price overrides for this pool")
    power_cap_w: float | None = Field(
        None, gt=0, description="board power limit per GPU in watts (nvidia-smi -pl), at most the GPU's TDP; "
                                "lowers sustained compute clocks (model/training/power.py, an estimate). "
                                "Same as writing gpu: NAME@NNNW")

    @model_validator(mode="before")
    @classmethod
    def _skypilot_form(cls, data: Any) -> Any:
        """`gpu: H100:8` means gpu H100 with gpus_per_node 8."""
        if isinstance(data, dict) and isinstance(data.get("gpu"), str):
            m = _ACCEL.match(data["gpu"])
            if m:
                name, count_text = m.group(1), m.group(2)
                if not count_text.isdigit() or int(count_text) <= 0:
                    raise ValueError(f"gpu: count in {data['gpu']!r} must be a positive integer "
                                     f"(TYPE:COUNT, e.g. H100:8)")
                count = int(count_text)
                given = data.get("gpus_per_node")
                if given is not None and given != count:
                    raise ValueError(f"gpu {data['gpu']!r} says {count} GPUs per node but gpus_per_node is {given}")
                data = {**data, "gpu": name, "gpus_per_node": count}
        return _with_power_cap(data)

    @field_validator("gpu")
    @classmethod
    def _gpu_known(cls, v: str) -> str:
        return _canonical(catalog.gpus, v)

    @field_validator("nic")
    @classmethod
    def _nic_known(cls, v: str) -> str:
        return _canonical(catalog.nics, v)

    @model_validator(mode="after")
    def _domain_fits(self) -> NodePool:
        d, g = self.domain_size, self.gpus_per_node
        if d > g and d % g:
            raise ValueError(f"scale-up domain of {d} GPUs is not a whole number of {g}-GPU nodes")
        if d < g and g % d:
            raise ValueError(f"{g} GPUs per node do not split into scale-up domains of {d} GPUs")
        return self

    # -- derived, from the catalog --------------------------------------------------
    @property
    def gpu_entry(self) -> Gpu:
        return catalog.gpus.get(self.gpu)

    @property
    def nic_entry(self) -> Nic:
        return catalog.nics.get(self.nic)

    @property
    def total_gpus(self) -> int:
        return self.count * self.gpus_per_node

    @property
    def domain_size(self) -> int:
        """GPUs in one scale-up domain as deployed in this pool.

        The override if given; else the catalog's domain, capped at gpus_per_node when
        it fits on one baseboard (a 4-GPU H100 node is a 4-GPU domain); a rack-scale
        catalog domain (> 8 GPUs, NVL72) spans nodes and is capped at the pool's GPUs."""
        if self.scale_up_domain is not None:
            return self.scale_up_domain
        cat = self.gpu_entry.domain_size
        if cat > self.gpus_per_node and cat > BOARD_GPUS:
            whole = math.ceil(min(cat, self.total_gpus) / self.gpus_per_node) * self.gpus_per_node
            return min(cat, whole)
        return min(cat, self.gpus_per_node)


class Fabric(Strict):
    """The compute (scale-out) fabric that joins the nodes' NICs."""
    topology: Literal["fat-tree", "rail-optimized", "single-switch"] = Field(
        "fat-tree", description="fat-tree: folded Clos; rail-optimized: fat tree whose leaves each "
                                "serve one NIC rail; single-switch: every NIC on one switch")
    levels: int | None = Field(None, ge=1, le=3, description="switch levels (1 leaf only, 2 leaf-spine, "
                                                           "3 leaf-spine-core); default: the fewest that fit")
    switch: str = Field(description="catalog switch name used at every level, e.g. QM9700")
    oversubscription: float = Field(
        1.0, ge=1, le=1024,     # past a switch's radix no leaf has an uplink; 1e308 overflowed leaf_ports
        description="leaf down:up port ratio; 1 = non-blocking, 2 = 2:1 at the leaf uplinks")
    nodes_per_leaf: int | None = Field(
        None, ge=1, description="nodes under one leaf (rail-optimized: nodes per rail group); "
                                "default: as many as the leaf's down ports hold")

    @field_validator("switch")
    @classmethod
    def _switch_known(cls, v: str) -> str:
        return _canonical(catalog.switches, v)

    @model_validator(mode="after")
    def _levels_match(self) -> Fabric:
        if self.topology == "single-switch" and self.levels not in (None, 1):
            raise ValueError(f"topology single-switch has 1 level, not {self.levels}")
        return self

    @property
    def switch_entry(self) -> Switch:
        return catalog.switches.get(self.switch)


class StorageTier(Strict):
    """One storage tier. For kind local-nvme the figures are per node (each node's own
    drives); for shared tiers (parallel-fs, object, nfs) they are totals for the cluster."""
    kind: Literal["local-nvme", "parallel-fs", "object", "nfs"]
    name: str = Field(min_length=1, description="unique tier name, e.g. lustre")
    capacity_tb: float = Field(gt=0, description="usable capacity, TB (1e12 bytes)")
    read_gbps: float = Field(gt=0, description="aggregate read bandwidth, GB/s")
    write_gbps: float = Field(gt=0, description="aggregate write bandwidth, GB/s")
    latency_ms: float = Field(ge=0, description="time to first byte of a read, ms")


class Facility(Strict):
    rack_kw_budget: float = Field(gt=0, description="power available per rack, kW")
    nodes_per_rack: int = Field(ge=1, description="GPU nodes per rack")
    voltage_v: float = Field(gt=0, description="supply voltage to the rack, V (e.g. 208, 415, 480)")
    phases: Literal[1, 3] = Field(description="1 = single-phase, 3 = three-phase supply")
    pue: float = Field(ge=1, description="power usage effectiveness: facility power / IT power")
    usd_per_kwh: float = Field(ge=0, description="electricity price, USD per kWh")
    cooling: Literal["air", "liquid"]


class ClusterSpec(Strict):
    """A GPU cluster: node pools on one compute fabric, storage tiers, facility, prices."""
    name: str = Field(min_length=1)
    description: str = ""
    node_pools: tuple[NodePool, ...] = Field(min_length=1, description="groups of identical nodes")
    fabric: Fabric
    storage: tuple[StorageTier, ...] = Field((), description="storage tiers, fastest first")
    facility: Facility | None = None
    prices: Prices = Field(Prices(), description="cluster-wide price overrides")

    @field_validator("node_pools")
    @classmethod
    def _unique_pools(cls, pools: tuple[NodePool, ...]) -> tuple[NodePool, ...]:
        _no_duplicates("node pool", [p.name for p in pools])
        return pools

    @field_validator("storage")
    @classmethod
    def _unique_tiers(cls, tiers: tuple[StorageTier, ...]) -> tuple[StorageTier, ...]:
        _no_duplicates("storage tier", [t.name for t in tiers])
        return tiers

    @field_validator("fabric")
    @classmethod
    def _fabric_fits(cls, fabric: Fabric, info: ValidationInfo) -> Fabric:
        pools = info.data.get("node_pools")
        if not pools:
            return fabric  # the pools' own error is reported instead
        sw = fabric.switch_entry
        for p in pools:
            nic = p.nic_entry
            if (nic.fabric == "infiniband") != (sw.fabric == "infiniband"):
                raise ValueError(f"pool {p.name!r}: NIC {p.nic} is {nic.fabric} but switch {sw.name} "
                                 f"is {sw.fabric}; InfiniBand NICs need InfiniBand switches")
        if fabric.topology == "rail-optimized":
            loose = [p.name for p in pools if not p.rail_optimized]
            if loose:
                raise ValueError(f"topology rail-optimized but pool(s) {', '.join(loose)} "
                                 f"have rail_optimized: false")
        from gpucluster.specs.fat_tree import fabric_of_pools
        fabric_of_pools(pools, fabric)  # raises ValueError when it cannot be built
        return fabric

    # -- helpers ----------------------------------------------------------------------
    @property
    def total_nodes(self) -> int:
        return sum(p.count for p in self.node_pools)

    @property
    def total_gpus(self) -> int:
        return sum(p.total_gpus for p in self.node_pools)

    def pool(self, name: str) -> NodePool:
        for p in self.node_pools:
            if p.name == name:
                return p
        raise unknown_name("node pool", name, [p.name for p in self.node_pools])

    def pool_prices(self, name: str) -> Prices:
        """Cluster-wide price overrides with the pool's own on top."""
        p = self.pool(name)
        return p.prices.merged_over(self.prices) if p.prices else self.prices


def _no_duplicates(kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"duplicate {kind} name {n!r}")
        seen.add(n)


@checked(ONE_PATH)
def load_cluster(path: str | Path) -> ClusterSpec:
    """Load and validate a cluster YAML; errors are one `UserError` line with file:line."""
    return load_model(ClusterSpec, path)


def dump_cluster(spec: ClusterSpec) -> str:
    """The spec as YAML (canonical names, unset optional fields left out);
    `load_cluster` of the text gives back an equal spec."""
    data = spec.model_dump(mode="json", exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
