"""Fit the collective model's latency ramp and report it leave-one-table-out.

The fitted numbers of catalog/data/links.yaml (sources `fit-nccl-tables*`) come from here. The
data are every published nccl-tests table in shared/validation/collective*-public.yaml: one table
is one source's curve for one GPU, group size, GPUs per node and op. The fit is physical: the same
few constants per link technology for every group size, the group size entering only through
NCCL's algorithm (2(n-1) ring steps, S/n bytes per step, a tree across nodes):

- NVLink (shared by every NVLink generation, the same NCCL code): the launch latency, the step
  latency of the bulk protocols, and the bulk protocols' ramp (half_bytes, k), i.e. how NCCL adds
  channels as the bytes per step grow;
- LL per generation (NVLink3, NVLink4): its step latency and its rate as a fraction of the link
  (NCCL's own tuner gives Ampere and Hopper different LL ceilings). Shared LL constants fit the
  tables in-sample about as well but predict a left-out table worse (median over tables 15.4%
  against 12.0% leave-one-table-out);
- NVLS (in-switch all-reduce): its ramp;
- RoCE: the network's start-up per collective (`base_latency_us`), its LL step and LL's rate.
  The bulk step stays the IB/RoCE estimate: the only multi-node table has two network steps, which
  cannot tell a per-step cost from a per-collective one, and a per-step cost would multiply by
  n - 1 on the long rings of large data-parallel groups. Its bulk ramp is not
  identified (NVLS inside the nodes sets the pace of the only multi-node table at every size),
  so it stays the NVLink ring's.

The asymptotic efficiencies stay as sourced (nccl-tests issue 212 for NVLink and NVLS, the IB/RoCE
estimates): a table that ends below its plateau cannot tell the plateau from the ramp.

Each parameter is pulled weakly towards its prior (NCCL's tuning constants, the earlier fit) so a
parameter no remaining table informs stays at its prior in leave-one-table-out. Errors are on
busbw, |predicted / measured - 1|.

    python benchmarks/collective_fit.py            # fit, in-sample and leave-one-table-out
    python benchmarks/collective_fit.py --yaml     # also print the fitted values for links.yaml
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Link, LowLatency, Sourced
from gpucluster.model.collectives import CommGroup, Tier, predict
from gpucluster.validate.predictors import fabric_for
from gpucluster.validate.runner import load_file
from gpucluster.specs.validation_case import Hardware

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT.parent / "shared" / "validation"
FILES = [VALIDATION / "collective-public.yaml", VALIDATION / "collective-smallgroups-public.yaml"]
PRIOR_WEIGHT = 0.05   # residual per unit of log(parameter / prior)


@dataclass
class Table:
    """One published nccl-tests curve: the cases of one source for one group and op."""
    id: str
    op: str
    group: CommGroup
    sizes: np.ndarray
    busbw: np.ndarray


@dataclass(frozen=True)
class Param:
    name: str
    links: tuple[str, ...]
    field: str          # base | hop | ll_hop | ll_eff | ring_half | ring_k | nvls_half | nvls_k
    lo: float
    hi: float


PARAMS = [
    Param("nvlink.base_latency_us", ("NVLink3", "NVLink4"), "base", 1.0, 40.0),
    Param("nvlink.hop_latency_us", ("NVLink3", "NVLink4"), "hop", 0.05, 10.0),
    Param("nvlink3.ll.hop_latency_us", ("NVLink3",), "ll_hop", 0.05, 10.0),
    Param("nvlink4.ll.hop_latency_us", ("NVLink4",), "ll_hop", 0.05, 10.0),
    Param("nvlink3.ll.efficiency", ("NVLink3",), "ll_eff", 0.02, 0.8),
    Param("nvlink4.ll.efficiency", ("NVLink4",), "ll_eff", 0.02, 0.8),
    Param("nvlink.ring.half_bytes", ("NVLink3", "NVLink4"), "ring_half", 1e4, 1e9),
    Param("nvlink.ring.ramp_exponent", ("NVLink3", "NVLink4"), "ring_k", 0.2, 2.0),
    Param("nvlink.in_switch.half_bytes", ("NVLink4",), "nvls_half", 1e4, 1e9),
    Param("nvlink.in_switch.ramp_exponent", ("NVLink4",), "nvls_k", 0.2, 2.0),
    Param("roce.base_latency_us", ("RoCE",), "base", 0.5, 200.0),
    Param("roce.ll.hop_latency_us", ("RoCE",), "ll_hop", 0.5, 60.0),
    Param("roce.ll.efficiency", ("RoCE",), "ll_eff", 0.02, 0.8),
]
# Priors, independent of the tables (leave-one-table-out must not start from a fit that saw the
# table left out): NCCL's tuning.cc for the latencies (6.6 us launch; per step about 0.6 us under
# LL and 1.9 us under LL128 on NVLink, 5 us under LL on the network) and for
# LL's rate (about 0.3 of the link: Ampere 87.7 of 300 GB/s, Hopper 141 of 450); round numbers of
# NCCL's step sizes (about 1 MB a step for rings, 10 MB for NVLS) for the ramps.
PRIOR = {"nvlink.base_latency_us": 6.6, "nvlink.hop_latency_us": 1.9, "nvlink3.ll.hop_latency_us": 0.6, "nvlink4.ll.hop_latency_us": 0.6,
         "nvlink3.ll.efficiency": 0.3, "nvlink4.ll.efficiency": 0.3, "nvlink.ring.half_bytes": 1e6,
         "nvlink.ring.ramp_exponent": 0.5, "nvlink.in_switch.half_bytes": 1e7,
         "nvlink.in_switch.ramp_exponent": 0.7, "roce.base_latency_us": 6.6, "roce.ll.hop_latency_us": 5.0,
         "roce.ll.efficiency": 0.3}


def _get(link: Link, field: str) -> float:
    """The catalog's current value of one fitted field."""
    ll, sw = link.low_latency, link.in_switch
    values = {"base": link.base_latency_us.value, "hop": link.hop_latency_us.value,
              "ll_hop": ll.hop_latency_us.value if ll else 0.0, "ll_eff": ll.efficiency.value if ll else 0.0,
              "ring_half": link.ring.half_bytes.value, "ring_k": link.ring.ramp_exponent.value,
              "nvls_half": sw.half_bytes.value if sw else 0.0, "nvls_k": sw.ramp_exponent.value if sw else 0.0}
    return values[field]


def _set(link: Link, values: dict[str, float]) -> Link:
    """A copy of `link` with the given fields replaced (sources kept: only the numbers move)."""
    def sv(old: Sourced | None, value: float) -> Sourced:
        return Sourced(value=value, source=old.source if old else link.base_latency_us.source)

    upd: dict = {}
    if "base" in values:
        upd["base_latency_us"] = sv(link.base_latency_us, values["base"])
    if "hop" in values:
        upd["hop_latency_us"] = sv(link.hop_latency_us, values["hop"])
    if "ring_half" in values or "ring_k" in values:
        upd["ring"] = link.ring.model_copy(update={
            "half_bytes": sv(link.ring.half_bytes, values.get("ring_half", link.ring.half_bytes.value)),
            "ramp_exponent": sv(link.ring.ramp_exponent, values.get("ring_k", link.ring.ramp_exponent.value))})
    if link.in_switch is not None and ("nvls_half" in values or "nvls_k" in values):
        r = link.in_switch
        upd["in_switch"] = r.model_copy(update={
            "half_bytes": sv(r.half_bytes, values.get("nvls_half", r.half_bytes.value)),
            "ramp_exponent": sv(r.ramp_exponent, values.get("nvls_k", r.ramp_exponent.value))})
    if "ll_hop" in values or "ll_eff" in values:
        ll = link.low_latency
        upd["low_latency"] = LowLatency(
            hop_latency_us=sv(ll.hop_latency_us if ll else None, values.get("ll_hop", _get(link, "ll_hop"))),
            efficiency=sv(ll.efficiency if ll else None, values.get("ll_eff", _get(link, "ll_eff"))))
    return link.model_copy(update=upd)


def prior() -> np.ndarray:
    return np.array([PRIOR[p.name] for p in PARAMS])


def catalog_values() -> np.ndarray:
    """What links.yaml holds now (the fit below should reproduce it)."""
    return np.array([_get(catalog.links.get(p.links[0]), p.field) for p in PARAMS])


def links_for(x: np.ndarray) -> dict[str, Link]:
    per: dict[str, dict[str, float]] = {}
    for p, v in zip(PARAMS, x, strict=True):
        for name in p.links:
            per.setdefault(name, {})[p.field] = float(v)
    return {name: _set(catalog.links.get(name), vals) for name, vals in per.items()}


def with_links(g: CommGroup, links: dict[str, Link]) -> CommGroup:
    up = Tier(links.get(g.scale_up.link.name, g.scale_up.link), g.scale_up.gbps_per_direction)
    out = g.scale_out
    if out is not None:
        out = Tier(links.get(out.link.name, out.link), out.gbps_per_direction)
    return replace(g, scale_up=up, scale_out=out)


def load_tables(files: list[Path]) -> list[Table]:
    """Group the collective cases of `files` into tables (source, hardware, group, op)."""
    rows: dict[tuple, list] = {}
    for f in files:
        for c in load_file(f).cases:
            if c.kind != "collective":
                continue
            coll = (c.model_extra or {})["collective"]
            hw = Hardware.model_validate(c.hardware)
            key = (c.source, hw.gpu, coll["gpus"], coll.get("gpus_per_node") or hw.gpus_per_node, coll["op"])
            rows.setdefault(key, []).append((c, hw, coll))
    tables = []
    for key, items in rows.items():
        c0, hw, coll = items[0]
        fab = fabric_for(hw)
        per_node = coll.get("gpus_per_node") or hw.gpus_per_node
        if per_node != hw.gpus_per_node:
            fab = replace(fab, gpus_per_node=per_node, domain=hw.scale_up_domain or per_node)
        tid = c0.id.rsplit("-", 1)[0]   # case ids are <table>-<size>
        tables.append(Table(tid, key[4], fab.group(coll["gpus"], 1),
                            np.array([float(i[2]["bytes"]) for i in items]),
                            np.array([float(i[0].measured["busbw_gbps"]) for i in items])))
    return tables


def predicted(x: np.ndarray, t: Table) -> np.ndarray:
    return np.asarray(predict(t.op, t.sizes, with_links(t.group, links_for(x))).busbw_gbps, dtype=float)


def fit(tables: list[Table], x0: np.ndarray) -> np.ndarray:
    lo = np.log([p.lo for p in PARAMS])
    hi = np.log([p.hi for p in PARAMS])
    z0 = np.clip(np.log(x0), lo + 1e-9, hi - 1e-9)

    def residuals(z: np.ndarray) -> np.ndarray:
        x = np.exp(z)
        # Each table weighs the same whatever its number of sizes (one source, one vote).
        err = [np.log(predicted(x, t) / t.busbw) / np.sqrt(len(t.sizes) / 10) for t in tables]
        return np.concatenate(err + [PRIOR_WEIGHT * (z - z0)])

    res = least_squares(residuals, z0, bounds=(lo, hi), loss="linear")
    return np.exp(res.x)


def errors(x: np.ndarray, t: Table) -> np.ndarray:
    return np.abs(predicted(x, t) / t.busbw - 1)


def leave_one_table_out(tables: list[Table], x0: np.ndarray,
                        fitter: Callable[[list[Table], np.ndarray], np.ndarray] = fit) -> dict[str, np.ndarray]:
    """Per table: its errors when the parameters are fitted on every other table."""
    return {t.id: errors(fitter([o for o in tables if o is not t], x0), t) for t in tables}


def main(argv: list[str]) -> int:
    missing = [f for f in FILES if not f.exists()]
    if missing:
        print(f"missing {', '.join(map(str, missing))}")
        return 1
    tables = load_tables(FILES)
    x0, cat = prior(), catalog_values()
    x = fit(tables, x0)
    print(f"{'parameter':34} {'prior':>10} {'fitted':>10} {'links.yaml':>10}")
    for p, a, b, c in zip(PARAMS, x0, x, cat, strict=True):
        print(f"{p.name:34} {a:10.4g} {b:10.4g} {c:10.4g}" + ("   <- refit differs" if abs(b / c - 1) > 0.03 else ""))
    loto = leave_one_table_out(tables, x0)
    print(f"\n{'table (busbw |error|)':30} {'n':>3} {'links.yaml med/max %':>21} {'in-sample med/max %':>20} "
          f"{'left out med/max %':>19}")
    alls: dict[str, list[np.ndarray]] = {"cat": [], "in": [], "out": []}
    for t in tables:
        e0, e1, e2 = errors(cat, t), errors(x, t), loto[t.id]
        alls["cat"].append(e0)
        alls["in"].append(e1)
        alls["out"].append(e2)
        print(f"{t.id:30} {len(t.sizes):3} {100 * np.median(e0):11.1f} /{100 * e0.max():6.1f} "
              f"{100 * np.median(e1):11.1f} /{100 * e1.max():6.1f} {100 * np.median(e2):10.1f} /{100 * e2.max():6.1f}")
    for k, label in (("cat", "links.yaml (in-sample)"), ("in", "refit (in-sample)"), ("out", "leave-one-table-out")):
        e = np.concatenate(alls[k])
        meds = [np.median(v) for v in alls[k]]
        print(f"{label:24} all cases median {100 * np.median(e):5.1f}%  max {100 * e.max():6.1f}%   "
              f"median over tables {100 * np.median(meds):5.1f}%  worst table median {100 * max(meds):5.1f}%")
    if "--yaml" in argv:
        print()
        for name, link in links_for(x).items():
            ll = link.low_latency
            assert ll is not None
            print(f"{name}: base {link.base_latency_us.value:.3g} hop {link.hop_latency_us.value:.3g} "
                  f"ll_hop {ll.hop_latency_us.value:.3g} ll_eff {ll.efficiency.value:.3g} "
                  f"ring half {link.ring.half_bytes.value:.3g} k {link.ring.ramp_exponent.value:.3g}"
                  + (f" nvls half {link.in_switch.half_bytes.value:.3g} k {link.in_switch.ramp_exponent.value:.3g}"
                     if link.in_switch else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
