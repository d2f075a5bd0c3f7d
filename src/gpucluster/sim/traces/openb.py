"""Alibaba GPU cluster trace 2023 (openb), from alibaba/clusterdata `cluster-trace-gpu-v2023`.

Pods: `name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
creation_time, deletion_time, scheduled_time` (seconds). A pod with num_gpu 1 and
gpu_milli < 1000 shares a GPU; gpu_spec lists allowed GPU models ('|'-separated,
empty = any). Nodes: `sn, cpu_milli, memory_mib, gpu, model`.
Run time = deletion - (scheduled, else creation). Pods without GPUs are skipped
(counted), unless `cpu_pods` is set (the fragmentation benchmark places them:
they hold CPU that GPU pods need).
"""

from __future__ import annotations

import csv
import math
from typing import TextIO

from gpucluster.errors import UserError
from gpucluster.sim.state import NodeInfo
from gpucluster.sim.traces import TraceJob, TraceRead, readers

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


MAX_GPUS_PER_NODE = 1024


def _int(text: str) -> int:
    v = float(text)
    if not math.isfinite(v) or v != int(v) or abs(v) > 2**53:
        raise ValueError(text)
    return int(v)


def _rows(reader: csv.DictReader, path: str):
    """The reader's rows; a malformed CSV (a field over the csv module's limit, a NUL) is one line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise UserError(f"not a readable CSV: {exc}", file=path, line=reader.line_num) from None


def _open(path: str, columns: tuple[str, ...]) -> tuple[csv.DictReader, TextIO]:
    f = open(path, newline="", encoding="utf-8", errors="replace")  # noqa: SIM115  (closed by the caller)
    reader = csv.DictReader(f)
    try:
        header = list(reader.fieldnames or [])   # read once: on an empty file each access reads again
    except (csv.Error, OSError) as exc:
        f.close()
        raise UserError(f"not a readable CSV: {exc}", file=path, line=1) from None
    missing = [c for c in columns if c not in header]
    if missing:
        f.close()
        raise UserError(f"not an openb CSV: no column {', '.join(missing)} (header: "
                        f"{', '.join(header)[:200] or 'none, the file is empty'})", file=path, line=1)
    return reader, f


@readers.register("openb", "alibaba-openb")
def read_pods(path: str, limit: int | None = None, cpu_pods: bool = False) -> TraceRead:
    out = TraceRead(path, "openb")
    reader, f = _open(path, POD_COLUMNS)
    with f:
        for row in _rows(reader, path):
            line = reader.line_num
            out.rows += 1
            try:
                cpu, mem, n, milli = (_int(row[k]) for k in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))
                created = _int(row["creation_time"])
                deleted = _int(row["deletion_time"])
                sched = row.get("scheduled_time") or ""
                start = _int(sched) if sched.strip() else created
            except (ValueError, TypeError):
                out.bad_row(line, "a number that is not an integer")
                continue
            if min(cpu, mem, n, milli, created) < 0:
                out.bad_row(line, "a negative value")
                continue
            if deleted < start:
                out.bad_row(line, "deleted before it started")
                continue
            if n == 0:
                if not cpu_pods:
                    out.skipped["without GPUs"] += 1
                    continue
                milli = 0
            elif (n == 1 and not 0 < milli <= 1000) or (n > 1 and milli not in (0, 1000)):
                out.bad_row(line, "gpu_milli outside 1..1000")
                continue
            spec = (row.get("gpu_spec") or "").strip()
            types = tuple(t for t in spec.split("|") if t) or None
            share = milli if n == 1 else 1000
            out.jobs.append(TraceJob(float(created), float(deleted - start), n, share, cpu, mem, types,
                                     row.get("name", "")))
            if limit is not None and len(out.jobs) >= limit:
                break
    return out


def read_nodes(path: str) -> tuple[list[NodeInfo], TraceRead]:
    """The openb node list as simulator nodes (one pool per GPU model; no leaf switches known)."""
    out = TraceRead(path, "openb-nodes")
    nodes: list[NodeInfo] = []
    reader, f = _open(path, NODE_COLUMNS)
    with f:
        for row in _rows(reader, path):
            out.rows += 1
            try:
                cpu, mem, gpus = _int(row["cpu_milli"]), _int(row["memory_mib"]), _int(row["gpu"])
            except (ValueError, TypeError):
                out.bad_row(reader.line_num, "a number that is not an integer")
                continue
            model = (row.get("model") or "").strip()
            if gpus <= 0 or not model:
                out.skipped["without GPUs"] += 1
                continue
            if cpu < 0 or mem < 0:
                out.bad_row(reader.line_num, "a negative value")
                continue
            if gpus > MAX_GPUS_PER_NODE:
                out.bad_row(reader.line_num, f"{gpus} GPUs in one node (more than {MAX_GPUS_PER_NODE})")
                continue
            nodes.append(NodeInfo(row["sn"], model, model, gpus, 0, cpu, mem))
    if not nodes:
        raise UserError("no usable GPU nodes in the node list", file=path)
    return nodes, out
