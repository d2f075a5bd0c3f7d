"""Throughput tables: steps per second of each job type on each GPU type (Gavel's format).

Two layouts are read (stanford-futuredata/gavel, `scheduler/`):

- the 2019 `oracle_throughputs.json`: GPU type -> job type -> {"null": steps/s alone on
  one GPU, "<other job type>": [this, other] steps/s when the two share the GPU}. Gavel's
  2019 simulator runs a k-GPU job on k GPUs at the single-GPU figure (`scale_aware` is
  False), and so do we for this layout.
- the later `simulation_throughputs.json`: keyed by "('<job type>', <scale factor>)", the
  figure being the whole job's steps/s on that many GPUs, with `<gpu>_unconsolidated`
  types for a job spread over servers.

The later table lacks some (job type, scale factor) pairs that traces hold (16 and 32
GPUs for everyone; 2-8 GPUs for A3C, CycleGAN and Recommendation). A missing pair is
filled from the largest measured scale factor below it, doubling by doubling: each
doubling multiplies the throughput by 2 x the median scaling efficiency measured for
that doubling on that GPU key across the job types that have both ends (the largest
measured doubling's median beyond 8 GPUs), at most 1: some consolidated V100 medians
exceed 1 (8 GPUs on one server beat 2 x 4), which must not compound. `filled` counts them; `fill_rule` says so.

Gavel's GPU names (v100, p100, k80) resolve to catalog GPUs through the catalog's
aliases; a name the catalog lacks stays as written.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gpucluster.files import is_file
from gpucluster.errors import UserError

FILL_RULE = ("missing (job type, scale factor) pairs: throughput at the largest measured scale below, "
             "x 2 x the median measured scaling efficiency per doubling on that GPU type (at most 1)")
SCALES = (1, 2, 4, 8, 16, 32)


@dataclass
class ThroughputTable:
    path: str
    layout: str                                   # "2019" or "scale"
    # (gpu key, job type, scale) -> steps/s; gpu keys as in the file (v100, v100_unconsolidated)
    alone: dict[tuple[str, str, int], float] = field(default_factory=dict)
    # (gpu key, job type, scale, other job type) -> (this, other) steps/s when packed
    packed: dict[tuple[str, str, int, str], tuple[float, float]] = field(default_factory=dict)
    filled: int = 0
    fill_rule: str = ""

    @property
    def scale_aware(self) -> bool:
        return self.layout == "scale"

    @property
    def gpus(self) -> list[str]:
        """Consolidated GPU keys, in file order."""
        return list(dict.fromkeys(g for g, _, _ in self.alone if not g.endswith("_unconsolidated")))

    @property
    def job_types(self) -> list[str]:
        return sorted({jt for _, jt, _ in self.alone})

    def throughput(self, job_type: str, gpu: str, scale: int = 1, spread: bool = False) -> float:
        """Steps/s of a job of `job_type` on `scale` GPUs of `gpu` (0: cannot run there)."""
        if not self.scale_aware:
            scale = 1
        key = f"{gpu}_unconsolidated" if spread and scale > 1 else gpu
        return self.alone.get((key, job_type, scale), 0.0)

    def pair(self, a: str, b: str, gpu: str, scale: int = 1) -> tuple[float, float]:
        """Steps/s of job types a and b packed on the same GPU(s); (0, 0) if not measured."""
        if not self.scale_aware:
            scale = 1
        return self.packed.get((gpu, a, scale, b), (0.0, 0.0))

    def speeds(self, job_type: str, scale: int = 1) -> dict[str, float]:
        """Steps/s on each consolidated GPU key."""
        return {g: self.throughput(job_type, g, scale) for g in self.gpus}

    def report(self) -> dict:
        return {"path": self.path, "layout": self.layout, "gpus": self.gpus, "job_types": len(self.job_types),
                "entries": len(self.alone), "packed_pairs": len(self.packed), "filled": self.filled,
                "fill_rule": self.fill_rule}


def _num(v: object, where: str, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise UserError(f"{where}: expected a non-negative number of steps/s, got {v!r}", file=path)
    return float(v)


def _key(raw: str, scale_aware: bool, where: str, path: str) -> tuple[str, int]:
    if not scale_aware:
        return raw, 1
    try:
        jt, sf = ast.literal_eval(raw)
        if not isinstance(jt, str) or not isinstance(sf, int) or sf < 1:
            raise ValueError
    except (ValueError, SyntaxError, TypeError):
        raise UserError(f"{where}: job key {raw!r} is not \"('<job type>', <scale factor>)\"", file=path) from None
    return jt, sf


def read_table(path: str | Path) -> ThroughputTable:
    """Read a Gavel throughput table; a malformed file is one UserError naming the entry."""
    p = str(path)
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise UserError(f"throughput table not found: {p}", file=p) from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the throughput table: {e}", file=p) from None
    except json.JSONDecodeError as e:
        raise UserError(f"not JSON: {e.msg}", file=p, line=e.lineno) from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise UserError("a throughput table maps GPU type -> job type -> {\"null\": steps/s, ...}", file=p)
    first = next((k for v in data.values() for k in v), "")
    scale_aware = first.startswith("(")
    table = ThroughputTable(p, "scale" if scale_aware else "2019")
    for gpu, jobs in data.items():
        for raw, entry in jobs.items():
            where = f"{gpu} / {raw}"
            jt, sf = _key(raw, scale_aware, where, p)
            if not isinstance(entry, dict) or "null" not in entry:
                raise UserError(f"{where}: expected an object with a \"null\" (alone) throughput", file=p)
            table.alone[(gpu, jt, sf)] = _num(entry["null"], where, p)
            for other, pair in entry.items():
                if other == "null":
                    continue
                if not isinstance(pair, list) or len(pair) != 2:
                    raise UserError(f"{where} / {other}: a packed pair is [steps/s, steps/s]", file=p)
                ojt, _ = _key(other, scale_aware, f"{where} / {other}", p)
                table.packed[(gpu, jt, sf, ojt)] = (_num(pair[0], where, p), _num(pair[1], where, p))
    if scale_aware:
        _fill(table)
    return table


def _fill(table: ThroughputTable) -> None:
    """Fill missing (job type, scale) pairs doubling by doubling (see the module docstring)."""
    import numpy as np
    keys = list(dict.fromkeys(g for g, _, _ in table.alone))
    types = table.job_types
    for g in keys:
        eff: dict[int, float] = {}
        for s in SCALES[1:]:
            ratios = [table.alone[(g, jt, s)] / (2 * table.alone[(g, jt, s // 2)]) for jt in types
                      if table.alone.get((g, jt, s), 0) > 0 and table.alone.get((g, jt, s // 2), 0) > 0]
            if ratios:
                eff[s] = min(1.0, float(np.median(ratios)))   # no super-linear extrapolation
        if not eff:
            continue
        for s in SCALES[1:]:
            eff.setdefault(s, eff[max(k for k in eff if k < s)] if any(k < s for k in eff) else min(eff.values()))
        for jt in types:
            for s in SCALES[1:]:
                if (g, jt, s) in table.alone or (g, jt, s // 2) not in table.alone:
                    continue
                table.alone[(g, jt, s)] = table.alone[(g, jt, s // 2)] * 2 * eff[s]
                table.filled += 1
    table.fill_rule = FILL_RULE if table.filled else ""


def catalog_name(gpu: str) -> str:
    """The catalog's name for a table GPU key (v100 -> V100-SXM2-16GB), else the key itself."""
    try:
        from gpucluster.catalog import catalog
        if gpu in catalog.gpus:
            return catalog.gpus.canonical(gpu)
    except UserError:  # a catalog that fails to load must not stop a trace replay: the key stands
        pass
    return gpu


def default_table(trace_path: str | Path) -> Path | None:
    """Where the shared data keeps the 2019 table beside Gavel's traces (../gavel/ from philly/)."""
    here = Path(trace_path).resolve().parent
    for cand in (here / "oracle_throughputs_2019.json", here.parent / "gavel" / "oracle_throughputs_2019.json"):
        if is_file(cand):
            return cand
    return None


def cluster_speeds(jobs: list, cluster_types: list[str], notes: list[str], workload: str):
    """A function giving each trace job its speed per cluster GPU type (relative to its fastest
    table type, the unit of its duration), or None for jobs without table throughputs.

    A cluster type matches a table type by the catalog's name for it (v100 -> V100-SXM2-16GB)
    or by the same name. A cluster with none of the table's types runs every job at its
    fastest table type's speed, and says so in the notes."""
    table_gpus = list(dict.fromkeys(g for j in jobs if j.speeds for g in j.speeds))
    if not table_gpus:
        return lambda j: None
    match: dict[str, str] = {}
    for t in cluster_types:
        for g in table_gpus:
            if catalog_name(g) == t or g.lower() == t.lower():
                match[t] = g
    if not match:
        notes.append(f"{workload}: the cluster has none of the throughput table's GPU types "
                     f"({', '.join(table_gpus)}); every job runs at its fastest table type's speed")
        return lambda j: None

    def speeds(j) -> dict[str, float] | None:
        if not j.speeds:
            return None
        best = max(j.speeds.values())
        return {t: j.speeds.get(g, 0.0) / best for t, g in match.items()}
    return speeds


def table_speeds(loaded, w, loc: tuple, types: list[str], reference: str,
                 gpu_counts: list[int]) -> dict[int, dict[str, float]]:
    """Speeds of a training workload's `job_type` on each cluster type, relative to its
    reference type (what duration_hours is measured on), per GPU count."""
    path = loaded.path(w.throughputs)
    if not is_file(path):
        raise UserError(f"throughput table not found: {path}", **loaded.where(*loc, "throughputs"))
    table = read_table(path)
    if w.job_type not in table.job_types:
        from gpucluster.errors import unknown_name
        raise unknown_name("job type", w.job_type, table.job_types, **loaded.where(*loc, "job_type"))
    by_type = {t: g for t in types for g in table.gpus if catalog_name(g) == t or g.lower() == t.lower()}
    if reference not in by_type:
        raise UserError(f"the throughput table has no GPU type matching {reference} (it has "
                        f"{', '.join(table.gpus)}); set reference_gpu to one of the cluster's types it has",
                        **loaded.where(*loc, "reference_gpu"))
    out = {}
    for n in gpu_counts:
        ref = table.throughput(w.job_type, by_type[reference], n)
        if ref <= 0:
            raise UserError(f"{w.job_type} has no throughput on {by_type[reference]} x {n}",
                            **loaded.where(*loc, "job_type"))
        out[n] = {t: table.throughput(w.job_type, by_type[t], n) / ref if t in by_type else 0.0 for t in types}
    return out
