"""Reproduce the fitted ramp parameters of catalog/data/links.yaml.

For each link technology with a measured curve, the asymptotic efficiency and
the latencies are fixed from their sources (nccl-tests issue 212, NCCL's
tuning constants); only (half_bytes, k) of the ramp are fitted, by least
squares on log busbw. Then a hold-out check: fit on the even-indexed sizes,
predict the odd ones.

    python benchmarks/collective_fit.py
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Sourced
from gpucluster.model.collectives import predict
from gpucluster.model.placement import place_group
from gpucluster.validate.runner import load_file

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT.parent / "shared" / "validation" / "collective-public.yaml"
# (GPU, link, algorithm whose ramp the curve measures)
CURVES = [("A100-SXM4-80GB", "NVLink3", "ring"), ("H100-SXM5-80GB", "NVLink4", "nvls")]


def curve(gpu_name: str) -> tuple[np.ndarray, np.ndarray]:
    cases = [c for c in load_file(FILE).cases if c.kind == "collective"
             and catalog.gpus.canonical((c.hardware or {})["gpu"]) == gpu_name]
    sizes = np.array([(c.model_extra or {})["collective"]["bytes"] for c in cases], dtype=float)   # an extra section
    return sizes, np.array([c.measured["busbw_gbps"] for c in cases])


def busbw(gpu_name: str, algo: str, sizes: np.ndarray, half: float, k: float) -> np.ndarray:
    gpu = catalog.gpus.get(gpu_name)
    link = catalog.links.get(gpu.scale_up.link)
    field = "in_switch" if algo == "nvls" else "ring"
    ramp = getattr(link, field)
    ramp = ramp.model_copy(update={"half_bytes": Sourced(value=half, source=ramp.half_bytes.source),
                                   "ramp_exponent": Sourced(value=k, source=ramp.ramp_exponent.source)})
    group = place_group(gpu, 8, 8)
    group = replace(group, scale_up=replace(group.scale_up, link=link.model_copy(update={field: ramp})))
    return np.asarray(predict("all_reduce", sizes, group, algo).busbw_gbps)


def fit(gpu_name: str, algo: str, sizes: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    res = least_squares(lambda p: np.log(busbw(gpu_name, algo, sizes, p[0] * 1e6, p[1]) / measured),
                        x0=[10.0, 0.7], bounds=([0.01, 0.2], [1e4, 3.0]))
    return res.x[0] * 1e6, res.x[1]


def main() -> int:
    if not FILE.exists():
        print(f"missing {FILE}")
        return 1
    for gpu_name, link, algo in CURVES:
        sizes, measured = curve(gpu_name)
        half, k = fit(gpu_name, algo, sizes, measured)
        err = busbw(gpu_name, algo, sizes, half, k) / measured - 1
        print(f"{link} {algo}: half_bytes = {half:.3g} B, k = {k:.2f}; in-sample |error| median "
              f"{100 * np.median(abs(err)):.1f}%, max {100 * abs(err).max():.1f}%")
        train = np.arange(len(sizes)) % 2 == 0
        h2, k2 = fit(gpu_name, algo, sizes[train], measured[train])
        held = busbw(gpu_name, algo, sizes[~train], h2, k2) / measured[~train] - 1
        print(f"  hold-out (fit on even sizes, predict odd): |error| median {100 * np.median(abs(held)):.1f}%, "
              f"max {100 * abs(held).max():.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
