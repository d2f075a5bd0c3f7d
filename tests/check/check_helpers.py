"""Build a cluster spec file and job files in a temporary folder, and run chosen rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpucluster.check.engine import build_context, run_checks

BASE: dict[str, Any] = {
    "name": "t",
    "node_pools": [{"name": "h200", "count": 4, "gpu": "H200:8", "cpu": "AMD EPYC 9654", "cpu_sockets": 2,
                    "cpu_cores": 192, "ram_gib": 1536, "local_nvme_tb": 30.72, "nics_per_node": 8, "nic": "NDR400"}],
    "fabric": {"topology": "fat-tree", "switch": "QM9700"},
    "storage": [
        {"kind": "local-nvme", "name": "nvme", "capacity_tb": 30.72, "read_gbps": 28, "write_gbps": 15, "latency_ms": 2},
        {"kind": "parallel-fs", "name": "lustre", "capacity_tb": 5000, "read_gbps": 200, "write_gbps": 200,
         "latency_ms": 80},
    ],
    "facility": {"rack_kw_budget": 40, "nodes_per_rack": 4, "voltage_v": 480, "phases": 3, "pue": 1.2,
                 "usd_per_kwh": 0.1, "cooling": "liquid"},
}
SMALL_MODEL = "llama2-7b"


def spec_with(**changes) -> dict:
    """BASE with dotted-path changes: spec_with(**{"fabric.oversubscription": 2})."""
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        node: Any = data
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def findings(tmp_path: Path, rule: str, spec: dict | None = None, jobs: dict[str, str] | None = None,
             model: str | None = SMALL_MODEL, **options):
    sp = tmp_path / "cluster.yaml"
    sp.write_text(yaml.safe_dump(spec or BASE, sort_keys=False))
    paths = []
    for name, text in (jobs or {}).items():
        p = tmp_path / name
        p.write_text(text)
        paths.append(str(p))
    ctx = build_context(str(sp), paths, model, **options)
    return run_checks(ctx, [rule])


def ids(fs) -> list[tuple[str, str]]:
    return [(f.rule, f.severity) for f in fs]
