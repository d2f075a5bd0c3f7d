"""The older and inference GPUs (issue 12): Volta, Pascal, Kepler, Turing, GA102 and AD104 parts load
with a source for every figure, keep the precisions they really have, resolve Gavel's and nvidia-smi's
names, and a missing precision is one clear error rather than a KeyError deep in the model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from gpucluster.catalog.models import GemmPoint, Sourced
from gpucluster.catalog.registry import DATA_DIR, Catalog
from gpucluster.errors import UserError

ROOT = Path(__file__).resolve().parents[2]

OLDER = ["V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB", "V100-PCIe-32GB", "P100-SXM2-16GB",
         "P100-PCIe-16GB", "K80", "T4", "A10", "A10G", "L4"]


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog()


def _sourced(model, path=""):
    """Every Sourced number of an entry with its dotted field path."""
    for name, value in model.__dict__.items():
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) \
            else [(None, value)]
        for key, item in items:
            where = f"{path}{name}" + (f".{key}" if key is not None else "")
            if isinstance(item, Sourced | GemmPoint):
                yield where, item
            elif isinstance(item, BaseModel):
                yield from _sourced(item, where + ".")


@pytest.mark.parametrize("name", OLDER)
def test_loads_with_a_dated_titled_source_for_every_figure(cat, name):
    g = cat.gpus.get(name)
    assert (DATA_DIR / "gpus" / f"{name}.yaml").is_file()
    figures = dict(_sourced(g))
    # The figures every GPU must carry, each with its own source.
    for need in ("peak_tflops.fp32", "peak_tflops.fp64", "memory.capacity_gib", "memory.bandwidth_tbps",
                 "scale_up.bandwidth_gbps_per_direction", "scale_up.domain_size", "tdp_w", "sm_count"):
        assert need in figures, (name, need)
    for where, item in figures.items():
        src = g.sources[item.source]
        assert src.title.strip() and src.date.year >= 2014, (name, where)
    # No source defined and never cited (a leftover is a sign of a dropped figure).
    cited = {item.source for item in figures.values()}
    assert set(g.sources) == cited, (name, set(g.sources) - cited)


@pytest.mark.parametrize("name", OLDER)
def test_prices_are_dated_price_lists_or_market(cat, name):
    g = cat.gpus.get(name)
    for price in (g.prices.purchase_usd, g.prices.rental_usd_per_gpu_hour):
        if price is not None:
            assert g.sources[price.source].kind in ("price-list", "market"), name


def test_precisions_are_the_ones_the_silicon_has(cat):
    peaks = {n: set(cat.gpus.get(n).peak_tflops) for n in OLDER}
    for v100 in ("V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB", "V100-PCIe-32GB"):
        assert peaks[v100] == {"fp64", "fp32", "fp16"}, v100          # tensor cores are fp16 only
    assert cat.gpus.get("V100-SXM2-16GB").peak_tflops["fp16"].value == 125
    assert cat.gpus.get("V100-PCIe-16GB").peak_tflops["fp16"].value == 112
    for p100 in ("P100-SXM2-16GB", "P100-PCIe-16GB"):
        assert peaks[p100] == {"fp64", "fp32", "fp16"}, p100
        p = cat.gpus.get(p100).peak_tflops
        assert p["fp16"].value == pytest.approx(2 * p["fp32"].value, rel=0.01)   # no tensor cores: 2x FP32
    assert peaks["K80"] == {"fp64", "fp32"}
    assert peaks["T4"] == {"fp64", "fp32", "fp16", "int8"}
    for ampere in ("A10", "A10G"):
        assert "bf16" in peaks[ampere] and "fp8" not in peaks[ampere], ampere
    assert {"bf16", "fp8"} <= peaks["L4"]


def test_k80_is_one_gk210_half_a_board(cat):
    """The K80 datasheet's board figures (2 x GK210), halved: one GK210 is one GPU."""
    k80 = cat.gpus.get("K80")
    board = {"fp32": 8.73, "fp64": 2.91}
    for prec, per_board in board.items():
        assert k80.peak_tflops[prec].value == pytest.approx(per_board / 2), prec
    assert k80.memory.bandwidth_tbps.value == pytest.approx(0.480 / 2)
    assert k80.tdp_w.value == pytest.approx(300 / 2)
    assert k80.sm_count.value == 4992 / 2 / 192
    assert 10.5 < k80.memory.capacity_gib.value <= 12          # 12 GB of the board's 24, ECC on
    text = (DATA_DIR / "gpus" / "K80.yaml").read_text()
    assert "GK210" in text and "HALF A BOARD" in text            # the comment that says so


def test_nvlink_generations_and_pcie_convention(cat):
    assert cat.gpus.get("V100-SXM2-16GB").scale_up.link == "NVLink2"
    assert cat.gpus.get("P100-SXM2-16GB").scale_up.link == "NVLink1"
    for sxm2 in ("V100-SXM2-16GB", "V100-SXM2-32GB", "P100-SXM2-16GB"):
        su = cat.gpus.get(sxm2).scale_up
        assert not su.switched and not su.in_switch_reduction, sxm2     # DGX-1 hybrid cube mesh
    # 6 x 25 and 4 x 20 GB/s per direction (the datasheets' 300 and 160 GB/s are bidirectional)
    assert cat.gpus.get("V100-SXM2-16GB").scale_up.bandwidth_gbps_per_direction.value == 150
    assert cat.gpus.get("P100-SXM2-16GB").scale_up.bandwidth_gbps_per_direction.value == 80
    for name in ("V100-PCIe-16GB", "V100-PCIe-32GB", "P100-PCIe-16GB", "K80", "T4", "A10", "A10G", "L4"):
        g = cat.gpus.get(name)
        assert g.scale_up.link.startswith("PCIe") and g.scale_up.switched, name   # as L40S: via the host
        assert g.host_link.startswith(g.scale_up.link), name
        assert cat.links.get(g.scale_up.link).kind == "scale-up", name


@pytest.mark.parametrize("alias,name", [
    ("v100", "V100-SXM2-16GB"), ("p100", "P100-PCIe-16GB"), ("k80", "K80"),      # Gavel's names
    ("V100", "V100-SXM2-16GB"), ("K80", "K80"), ("GK210", "K80"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"), ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),   # nvidia-smi
    ("Tesla V100-PCIE-16GB", "V100-PCIe-16GB"), ("Tesla P100-PCIE-16GB", "P100-PCIe-16GB"),
    ("Tesla K80", "K80"), ("Tesla T4", "T4"), ("NVIDIA A10G", "A10G"), ("NVIDIA L4", "L4"),
    ("t4", "T4"), ("a10g", "A10G"), ("l4", "L4"), ("A10", "A10"), ("v100_sxm2_32gb", "V100-SXM2-32GB"),
])
def test_aliases_resolve(cat, alias, name):
    assert cat.gpus.canonical(alias) == name


def test_skypilot_form_with_gavel_names():
    from gpucluster.catalog.registry import parse_accelerator
    gpu, n = parse_accelerator("k80:8")
    assert (gpu.name, n) == ("K80", 8)


def test_dgx1_v100_power_is_the_vendor_maximum():
    from gpucluster.model.facility import vendor_system
    for name in ("V100-SXM2-16GB", "V100-SXM2-32GB"):
        found = vendor_system(name, 8)
        assert found is not None and found[0].max_kw.value == 3.5, name
        assert found[1].kind == "datasheet"
    assert vendor_system("P100-SXM2-16GB", 8) is None      # no source at hand: summed from parts


# --- a missing precision is one clear error --------------------------------------------------

def test_plan_train_bf16_on_v100_names_gpu_precision_and_alternatives():
    from gpucluster.plan.train_request import plan_train
    with pytest.raises(UserError) as exc:
        plan_train("Llama-2-7B", gpu="V100-SXM2-32GB:8", precision="bf16")
    e = exc.value
    assert e.field == "--precision"
    for needle in ("V100-SXM2-32GB", "bf16", "fp64, fp32, fp16", "--precision fp16"):
        assert needle in e.reason, e.reason


def test_plan_train_on_k80_says_no_training_precision():
    from gpucluster.plan.train_request import plan_train
    with pytest.raises(UserError, match=r"K80 has no fp16 .*it has: fp64, fp32"):
        plan_train("Llama-2-7B", gpu="K80:8", precision="fp16")


def test_plan_train_fp16_on_v100_works():
    from gpucluster.plan.train_request import plan_train
    plan = plan_train("Llama-2-7B", gpu="V100-SXM2-32GB:8", precision="fp16", top=1)
    best = plan.best
    assert best.layout.precision == "fp16"
    assert best.peak_tflops == 125
    assert 0 < best.mfu < 1


def test_default_precision_falls_back_to_fp16(cat):
    from gpucluster.plan.train_search import training_precision
    assert training_precision(cat.gpus.get("V100-SXM2-16GB")) == "fp16"
    assert training_precision(cat.gpus.get("T4")) == "fp16"
    assert training_precision(cat.gpus.get("L4")) == "bf16"
    assert training_precision(cat.gpus.get("H100")) == "bf16"


def test_cli_bf16_on_v100_is_one_line_exit_2():
    exe = Path(sys.executable).parent / "gpucluster"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.run([str(exe), "plan", "train", "--model", "Llama-2-7B", "--gpu", "V100-SXM2-32GB",
                           "--precision", "bf16"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr and len(err.splitlines()) == 1, err
    assert "V100-SXM2-32GB has no bf16" in err and "fp16" in err


# --- Gavel's 36:36:36 cluster ------------------------------------------------------------------

def test_gavel_example_is_36_v100_36_p100_36_k80_one_per_server():
    from gpucluster.specs.cluster import load_cluster
    spec = load_cluster(ROOT / "examples" / "gavel-36-36-36.yaml")
    pools = {p.gpu: (p.count, p.gpus_per_node) for p in spec.node_pools}
    assert pools == {"V100-SXM2-16GB": (36, 1), "P100-PCIe-16GB": (36, 1), "K80": (36, 1)}


def test_simulator_speed_estimate_compares_at_a_shared_precision():
    """V100 vs K80 at fp32 (K80 has no fp16): not the same speed, as a missing bf16 once made them."""
    from gpucluster.sim.workload import peak_speeds
    speeds = peak_speeds(["V100-SXM2-16GB", "P100-PCIe-16GB", "K80"], "V100-SXM2-16GB")
    assert speeds is not None
    assert speeds["K80"] == pytest.approx(4.365 / 15.7)
    assert speeds["P100-PCIe-16GB"] == pytest.approx(9.3 / 15.7)
    t4, a100 = peak_speeds(["V100-SXM2-16GB", "T4"], "V100-SXM2-16GB"), peak_speeds(["H100", "A100"], "H100")
    assert t4 is not None and a100 is not None
    assert t4["T4"] == pytest.approx(65 / 125)                          # fp16
    assert a100["A100"] == pytest.approx(312 / 989.4, rel=1e-3)         # bf16


def test_serving_on_k80_is_one_line_naming_the_precisions():
    exe = Path(sys.executable).parent / "gpucluster"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.run([str(exe), "plan", "serve", "--model", "Llama-2-7B", "--rate", "5", "--gpu", "K80:8"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr and len(err.splitlines()) == 1, err
    assert "K80 has no bf16 or fp16 (it has: fp64, fp32)" in err
