"""Loads the catalog's data files into one registry per family.

Layout of `data/`: one YAML per GPU SKU in `gpus/`; `links.yaml`, `nics.yaml`,
`switches.yaml` and `cpus.yaml` hold a file-wide `sources:` map and a list of
`entries:` that cite it. Loaded once, on first use, so that commands that do
not touch the catalog start fast; the packaged catalog's families are kept validated between
runs (catalog/cache.py), so that a command does not parse and validate them at every start.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from gpucluster.catalog.cache import cached
from gpucluster.catalog.models import Cpu, Entry, Gpu, Link, Nic, Source, Sourced, Switch
from gpucluster.errors import UserError
from gpucluster.registry import Registry

DATA_DIR = Path(__file__).parent / "data"
E = TypeVar("E", bound=Entry)


def _fill(reg: Registry[E], model: type[E], path: Path) -> Registry[E]:
    from gpucluster.specs.loader import load_yaml, parse_data

    data, lines = load_yaml(path)
    if not isinstance(data, dict) or "entries" not in data:
        raise UserError("expected a mapping with `sources:` and `entries:`", file=str(path))
    sources = data.get("sources", {})
    for i, raw in enumerate(data["entries"]):
        if not isinstance(raw, dict):
            raise UserError("each entry must be a mapping", file=str(path), field=f"entries[{i}]")
        entry = parse_data(model, {**raw, "sources": sources}, str(path), lines, prefix=("entries", i),
                           context={"sources": sources})
        reg.add(entry.name, entry, entry.aliases)
    return reg


# `H100@500W`: a catalog GPU run under a board power limit (nvidia-smi -pl), see model/training/power.py.
_CAPPED = re.compile(r"^\s*(?P<base>[^@]+?)\s*@\s*(?P<watts>\d+(?:\.\d+)?)\s*[wW]\s*$")


MIN_CAP_FRACTION = 0.25  # nvidia-smi refuses limits much below this share of TDP (H100: 200 of 700 W)


def cap_problem(tdp_w: float, cap_w: float) -> str | None:
    """Why this power cap cannot be set on a chip of this TDP (None: it can)."""
    if cap_w > tdp_w:
        return f"power_cap_w ({cap_w:g} W) is above the chip's TDP ({tdp_w:g} W): a cap can only lower it"
    if cap_w < MIN_CAP_FRACTION * tdp_w:
        return (f"power_cap_w ({cap_w:g} W) is below {MIN_CAP_FRACTION:.0%} of the chip's TDP ({tdp_w:g} W), "
                "under what the driver accepts")
    return None


def capped_name(base: str, cap_w: float) -> str:
    return f"{base}@{cap_w:g}W"


class GpuRegistry(Registry[Gpu]):
    """The GPU family, where `NAME@NNNW` names the catalog GPU NAME under a power cap of NNN watts: a
    derived entry (power_cap_w set, every other number the chip's own) made on first use."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self._capped: dict[str, Gpu] = {}

    def canonical(self, name: str, **where) -> str:
        m = _CAPPED.match(name) if "@" in name else None
        if m is None:
            return super().canonical(name, **where)
        base = self._entries[super().canonical(m.group("base"), **where)]
        cap = float(m.group("watts"))
        if (why := cap_problem(base.tdp_w.value, cap)) is not None:
            raise UserError(why, field=where.get("field"), file=where.get("file"))
        key = capped_name(base.name, cap)
        if key not in self._capped:
            if cap >= base.tdp_w.value:
                self._capped[key] = base
            else:
                src = Source(title=f"power_cap_w {cap:g} W set in the cluster spec or case (an input; the chip's TDP "
                                   f"is {base.tdp_w.value:g} W)", kind="input", date=base.sources[base.tdp_w.source].date)
                self._capped[key] = base.model_copy(update={
                    "name": key, "aliases": [], "power_cap_w": Sourced(value=cap, source="power-cap"),
                    "sources": {**base.sources, "power-cap": src}})
        return key

    def get(self, name: str, **where) -> Gpu:
        if "@" not in name:
            return super().get(name, **where)
        key = self.canonical(name, **where)
        return self._capped[key] if key in self._capped else self._entries[key]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and (m := _CAPPED.match(name)):
            return super().__contains__(m.group("base"))
        return super().__contains__(name)

    def __getstate__(self) -> dict:
        # Capped entries are made per run from the cluster spec or case: never kept in the catalog cache.
        return {**self.__dict__, "_capped": {}}


def _gpus(files: list[Path]) -> Registry[Gpu]:
    from gpucluster.specs.loader import load_yaml, parse_data

    reg: Registry[Gpu] = GpuRegistry("GPU")
    for path in files:
        data, lines = load_yaml(path)
        sources = data.get("sources") if isinstance(data, dict) else None
        gpu = parse_data(Gpu, data, str(path), lines, context={"sources": sources or {}})
        reg.add(gpu.name, gpu, gpu.aliases)
    return reg


class Catalog:
    def __init__(self, data_dir: Path = DATA_DIR) -> None:
        self.data_dir = data_dir

    @cached_property
    def gpus(self) -> Registry[Gpu]:
        files = sorted((self.data_dir / "gpus").glob("*.yaml"))
        return cached("gpus", files, lambda: _gpus(files))

    @cached_property
    def links(self) -> Registry[Link]:
        return self._family("links", "link technology", Link)

    @cached_property
    def nics(self) -> Registry[Nic]:
        return self._family("nics", "NIC", Nic)

    @cached_property
    def switches(self) -> Registry[Switch]:
        return self._family("switches", "switch", Switch)

    @cached_property
    def cpus(self) -> Registry[Cpu]:
        return self._family("cpus", "CPU", Cpu)

    def _family(self, file: str, kind: str, model: type[E]) -> Registry[E]:
        path = self.data_dir / f"{file}.yaml"
        return cached(file, [path], lambda: _fill(Registry(kind), model, path))

    def families(self) -> dict[str, Registry]:
        return {"gpu": self.gpus, "link": self.links, "nic": self.nics,
                "switch": self.switches, "cpu": self.cpus}

    def find(self, name: str) -> tuple[str, Entry]:
        """Look a name up in every family (for `gpucluster catalog NAME`)."""
        gpu_name = name.split(":")[0] if re.fullmatch(r"[^:]+:\d+", name) else name
        for family, reg in self.families().items():
            if gpu_name in reg:
                return family, reg.get(gpu_name)
        all_names = [n for reg in self.families().values() for n in reg.names()]
        from gpucluster.errors import unknown_name
        plural = {form: f for f in self.families() for form in (f, f"{f}s", f"{f}es")}
        kind = plural.get(name.strip().lower())
        if kind:   # `catalog gpus`: a family, not an entry
            raise unknown_name("catalog entry", name, all_names, suggest=[f"--kind {kind}"])
        raise unknown_name("catalog entry", name, all_names)


# GPUCLUSTER_CATALOG: a catalog copy with calibrated numbers (`gpucluster bench gemm --write-calibration`).
catalog = Catalog(Path(os.environ["GPUCLUSTER_CATALOG"]) if os.environ.get("GPUCLUSTER_CATALOG") else DATA_DIR)

_ACCEL = re.compile(r"^\s*([^:\s]+)\s*(?::\s*(\S+))?\s*$")


def parse_accelerator(text: str, *, field: str | None = None, file: str | None = None) -> tuple[Gpu, int]:
    """SkyPilot-style `H100:8` (type:count per node); a bare name means one GPU."""
    m = _ACCEL.match(text)
    if not m:
        raise UserError(f"expected TYPE or TYPE:COUNT such as H100:8, got {text!r}", field=field, file=file)
    name, count_text = m.group(1), m.group(2)
    count = 1
    if count_text is not None:
        # ASCII digits only (str.isdigit() takes '²', which int() refuses), and bounded before
        # int() (5,000 digits raised ValueError): a node's GPUs are at most 1,024, as in a spec.
        if not re.fullmatch(r"[0-9]{1,7}", count_text) or not 1 <= int(count_text) <= 1024:
            raise UserError(f"GPU count must be an integer from 1 to 1,024, got {count_text[:40]!r}", field=field,
                            file=file)
        count = int(count_text)
    return catalog.gpus.get(name, field=field, file=file), count
