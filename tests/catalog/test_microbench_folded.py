"""Every chip from its own measurements: the public microbenchmark rows are in the chip's catalog file
with a source, the chip's GEMM curve is fitted on its own rows, and the variants people run exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.catalog import catalog
from gpucluster.model.training.compute import gemm_curve

MICROBENCH = Path(__file__).resolve().parents[3] / "shared" / "reference" / "microbench-public.yaml"
PRECISIONS = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"}


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    if not MICROBENCH.exists():
        pytest.skip("shared/reference/microbench-public.yaml is not beside this checkout")
    return yaml.safe_load(MICROBENCH.read_text())["rows"]


def test_every_gemm_row_of_a_catalog_chip_is_in_its_file(rows):
    checked = 0
    for r in rows:
        if r["kind"] != "gemm" or not r.get("shape") or r["gpu"] not in catalog.gpus or r["precision"] not in PRECISIONS:
            continue
        gpu = catalog.gpus.get(r["gpu"])
        s = r["shape"]
        mine = [p for p in gpu.efficiency.gemm
                if (p.m, p.n, p.k, p.precision) == (s["m"], s["n"], s["k"], r["precision"])]
        same = [p for p in mine if p.tflops == pytest.approx(r["measured"]["tflops"], rel=0.01)]
        assert same, f"{r['id']} missing from {gpu.name}"
        assert gpu.sources[same[0].source].kind == "measured"
        checked += 1
    assert checked >= 80


def test_every_attention_row_of_a_catalog_chip_is_in_its_file(rows):
    checked = 0
    for r in rows:
        if (r["kind"] != "attention" or r["gpu"] not in catalog.gpus or "tflops" not in r["measured"]
                or r["precision"] not in PRECISIONS):
            continue
        a = r["attention"]
        gpu = catalog.gpus.get(r["gpu"])
        mine = [p for p in gpu.efficiency.attention
                if (p.kernel, p.direction, p.precision, p.seq_len, p.head_dim, p.causal) ==
                (a["kernel"], a["pass"], r["precision"], a["seq_len"], a["head_dim"], a["causal"])
                and p.tflops == pytest.approx(r["measured"]["tflops"])]
        assert mine, f"{r['id']} missing from {gpu.name}"
        assert gpu.sources[mine[0].source].kind == "measured"
        checked += 1
    assert checked >= 60


@pytest.mark.parametrize("name", ["H100-SXM5-80GB", "H200-SXM-141GB", "B200", "GB200", "MI300X", "MI325X", "H800"])
def test_a_measured_chip_fits_its_own_gemm_curve(name):
    gpu = catalog.gpus.get(name)
    for precision in sorted({p.precision for p in gpu.efficiency.gemm} & set(gpu.peak_tflops)):
        curve = gemm_curve(name, precision)
        assert f"measured {name} GEMM" in curve.provenance, (name, precision, curve.provenance)
    # No GEMM point of the chip is another chip's measurement (the H100 file once held an H200 figure).
    for p in gpu.efficiency.gemm:
        assert "same-die" not in p.source and "borrow" not in gpu.sources[p.source].title.lower()


@pytest.mark.parametrize("name,precision", [("H800", "fp8"), ("MI325X", "fp8"), ("H100-SXM5-80GB", "bf16"),
                                            ("B200", "bf16"), ("A100-SXM4-80GB", "bf16")])
def test_a_curve_does_not_extrapolate_far_past_the_chips_best_measured_gemm(name, precision):
    from gpucluster.model.training.compute import EXTRAPOLATION_MARGIN, _fit, _sms, _square_points

    gpu = catalog.gpus.get(name)
    peak = gpu.peak_tflops[precision].value
    pts = _square_points(gpu, precision)
    best = max(p.tflops for p in pts)
    a, t0 = _fit(pts, _sms(gpu), peak)
    assert 1.0 / (a * peak * 1e12) <= EXTRAPOLATION_MARGIN * best / peak * (1 + 1e-12)
    assert t0 >= 0
    # Where the free fit stays within the margin (a full square sweep), the cap changes nothing.
    free_a, free_t0 = _fit(pts, _sms(gpu))
    if 1.0 / (free_a * peak * 1e12) <= EXTRAPOLATION_MARGIN * best / peak:
        assert (a, t0) == (free_a, free_t0)
    else:   # H800's DeepGEMM table and MI325X's two fp8 shapes are small or skinny
        assert name in ("H800", "MI325X")


def test_a_chip_without_gemm_rows_borrows_its_own_architecture_and_says_so():
    curve = gemm_curve("A100-SXM4-40GB", "bf16")
    assert "A100-SXM4-80GB's curve (same architecture" in curve.provenance
    assert "estimate" in curve.provenance


def test_microbench_hbm_sets_the_fraction_where_the_chip_had_none():
    for name, frac in (("H100-PCIe", 1.832 / 2.0), ("MI300X", 4.1 / 5.3)):
        measured = catalog.gpus.get(name).efficiency.hbm_fraction
        assert measured is not None and measured.value == pytest.approx(frac, abs=0.001)


@pytest.mark.parametrize(("name", "bf16", "hbm_tbps", "nvlink"), [
    ("H800", 989.4, 3.35, 200), ("H100-NVL", 835.5, 3.9, 300), ("H100-SXM5-96GB", 989.4, 3.36, 450),
    ("H100-PCIe", 756.5, 2.0, 300)])
def test_variants_people_run_are_in_the_catalog_with_datasheet_sources(name, bf16, hbm_tbps, nvlink):
    gpu = catalog.gpus.get(name)
    assert gpu.peak_tflops["bf16"].value == bf16
    assert gpu.memory.bandwidth_tbps.value == hbm_tbps
    assert gpu.scale_up.bandwidth_gbps_per_direction.value == nvlink
    for value in (gpu.peak_tflops["bf16"], gpu.memory.bandwidth_tbps, gpu.tdp_w):
        assert gpu.sources[value.source].kind == "datasheet"


def test_power_capped_name_is_a_derived_entry_with_its_cap_as_an_input():
    gpu = catalog.gpus.get("H100@450W")
    cap = gpu.power_cap_w
    assert gpu.name == "H100-SXM5-80GB@450W" and cap is not None and cap.value == 450
    assert gpu.sources[cap.source].kind == "input"
    assert gpu.peak_tflops == catalog.gpus.get("H100").peak_tflops
    assert "H100-SXM5-80GB@450W" not in catalog.gpus.names()  # never listed as a catalog chip
