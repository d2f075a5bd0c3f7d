"""Write measured GEMM points and the HBM fraction into a catalog copy (never the shipped files):
`--write-calibration DIR` copies the shipped catalog to DIR on first use and updates the GPU's
file there; `GPUCLUSTER_CATALOG=DIR` then makes every command use it."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import yaml

from gpucluster.errors import UserError

SOURCE = "measured-here"


def ensure_copy(dest: str) -> Path:
    from gpucluster.catalog.registry import DATA_DIR

    d = Path(dest)
    if d.resolve() == DATA_DIR.resolve():
        raise UserError("will not write into the shipped catalog; give a folder of your own", field="--write-calibration")
    if not d.exists():
        shutil.copytree(DATA_DIR, d)
    elif not (d / "gpus").is_dir():
        raise UserError("exists but is not a catalog copy (no gpus/ folder)", file=dest)
    return d


def gpu_file(d: Path, gpu_name: str) -> Path:
    from gpucluster.catalog import catalog

    name = catalog.gpus.canonical(gpu_name)
    p = d / "gpus" / f"{name}.yaml"
    if not p.exists():
        raise UserError(f"no {name}.yaml in the catalog copy", file=str(d))
    return p


def write_calibration(dest: str, gpu_name: str, *, gemm_rows: list[dict] | None = None,
                      hbm_tbps: float | None = None, note: str = "") -> Path:
    """Add measured points (replacing earlier measured ones of the same shape and precision)."""
    from gpucluster.catalog import catalog

    p = gpu_file(ensure_copy(dest), gpu_name)
    data = yaml.safe_load(p.read_text())
    data.setdefault("sources", {})[SOURCE] = {
        "title": f"Measured by gpucluster bench on this cluster{': ' + note if note else ''}",
        "kind": "measured", "date": datetime.date.today().isoformat()}
    eff = data.setdefault("efficiency", {})
    if gemm_rows:
        keep = [pt for pt in eff.get("gemm", []) if not (pt.get("source") == SOURCE and any(
            (pt["m"], pt["n"], pt["k"], pt["precision"]) == (r["m"], r["n"], r["k"], r["precision"]) for r in gemm_rows))]
        eff["gemm"] = keep + [{"m": r["m"], "n": r["n"], "k": r["k"], "precision": r["precision"],
                               "tflops": round(r["tflops"], 1), "source": SOURCE} for r in gemm_rows]
    if hbm_tbps is not None:
        peak = catalog.gpus.get(gpu_name).memory.bandwidth_tbps.value
        eff["hbm_fraction"] = {"value": round(min(hbm_tbps / peak, 1.0), 3), "source": SOURCE}
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p
