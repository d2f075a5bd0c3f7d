"""The catalog's data files load, resolve the names other files use, and pass sanity invariants
that would catch typos (a dropped digit, a sparse figure where a dense one belongs, a unit slip)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpucluster.catalog.registry import DATA_DIR, Catalog
from gpucluster.errors import UserError


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog()


# --- loading and names ------------------------------------------------------------------------

def test_every_file_loads(cat):
    families = cat.families()
    for family in ("gpu", "link", "nic", "switch", "cpu"):
        assert len(families[family]) > 0, family
    assert len(list((DATA_DIR / "gpus").glob("*.yaml"))) == len(cat.gpus)


def test_gpu_file_names_are_canonical_names(cat):
    for path in (DATA_DIR / "gpus").glob("*.yaml"):
        assert cat.gpus.get(path.stem).name == path.stem


# Training parts with bf16 tensor cores (Ampere datacenter and later, CDNA3).
MODERN = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-PCIe", "H200-SXM-141GB",
          "B200", "GB200", "MI300X", "MI325X", "L40S"]
# Older and inference parts (issue 12): Volta, Pascal, Kepler, Turing, GA102, AD104.
OLDER = ["V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB", "V100-PCIe-32GB", "P100-SXM2-16GB",
         "P100-PCIe-16GB", "K80", "T4", "A10", "A10G", "L4"]


@pytest.mark.parametrize("name", MODERN + OLDER)
def test_gpu_names_resolve(cat, name):
    assert cat.gpus.get(name).name == name


@pytest.mark.parametrize("alias,name", [
    ("H100", "H100-SXM5-80GB"),
    ("A100", "A100-SXM4-80GB"), ("A100-80GB", "A100-SXM4-80GB"), ("A100-SXM4", "A100-SXM4-80GB"),
    ("A100-40GB", "A100-SXM4-40GB"),
    ("H200", "H200-SXM-141GB"), ("H200-SXM", "H200-SXM-141GB"), ("H200-141GB", "H200-SXM-141GB"),
    ("GB200-NVL72", "GB200"), ("H100-PCIE-80GB", "H100-PCIe"),
    ("h200", "H200-SXM-141GB"), ("a100_80gb", "A100-SXM4-80GB"),   # case and _ are folded
])
def test_gpu_aliases_resolve(cat, alias, name):
    assert cat.gpus.canonical(alias) == name


@pytest.mark.parametrize("alias,name", [
    ("ConnectX-6", "HDR200"), ("HDR", "HDR200"), ("IB-200", "HDR200"),
    ("ConnectX-7", "NDR400"), ("NDR", "NDR400"), ("IB-400", "NDR400"),
    ("ConnectX-8", "XDR800"), ("XDR", "XDR800"), ("IB-800", "XDR800"),
    ("RoCE-100G", "RoCE-100G"), ("RoCE-200G", "RoCE-200G"), ("RoCE-400G", "RoCE-400G"),
    ("Ethernet-25G", "Ethernet-25G"), ("Ethernet-100G", "Ethernet-100G"),
    ("Ethernet-200G", "Ethernet-200G"), ("Ethernet-400G", "Ethernet-400G"),
])
def test_nic_names_resolve(cat, alias, name):
    assert cat.nics.canonical(alias) == name


@pytest.mark.parametrize("alias,name", [
    ("QM8700", "QM8700"), ("QM9700", "QM9700"), ("MQM9700", "QM9700"), ("Q3400", "Q3400"),
    ("SN5600", "SN5600"), ("SN5600-400G", "SN5600-400G"), ("SN4600C", "SN4600C"),
])
def test_switch_names_resolve(cat, alias, name):
    assert cat.switches.canonical(alias) == name


def test_unknown_gpu_is_a_user_error(cat):
    with pytest.raises(UserError, match="H100-SXM5-80GB"):
        cat.gpus.get("H1OO")


# --- GPU invariants ---------------------------------------------------------------------------

def _gpus(cat):
    return [g for _, g in cat.gpus.items()]


def test_fp8_is_twice_bf16(cat):
    checked = 0
    for g in _gpus(cat):
        p = g.peak_tflops
        if "fp8" in p:
            checked += 1
            assert p["fp8"].value == pytest.approx(2 * p["bf16"].value, rel=0.02), g.name
    assert checked >= 7   # Hopper, Blackwell, CDNA3 and Ada parts all have FP8


def test_fp4_is_twice_fp8_on_blackwell(cat):
    # Blackwell Ultra (B300, GB300) runs dense FP4 at ~3x FP8 (14-15 PF against 4.5-5): more than twice.
    for g in _gpus(cat):
        if g.architecture == "Blackwell":
            fp4, fp8 = g.peak_tflops["fp4"].value, g.peak_tflops["fp8"].value
            if "Ultra" in g.form_factor:
                assert 2 * fp8 < fp4 < 3.5 * fp8, g.name
            else:
                assert fp4 == pytest.approx(2 * fp8), g.name


def test_tf32_is_half_bf16_on_nvidia(cat):
    for g in _gpus(cat):
        if g.vendor == "nvidia" and "tf32" in g.peak_tflops:
            p = g.peak_tflops
            assert p["tf32"].value == pytest.approx(p["bf16"].value / 2, rel=0.02), g.name


def test_precisions_present_and_ordered(cat):
    for name in MODERN:
        p = {k: v.value for k, v in cat.gpus.get(name).peak_tflops.items()}
        for need in ("fp64", "fp32", "tf32", "bf16", "fp16", "int8"):
            assert need in p, (name, need)
    for g in _gpus(cat):
        p = {k: v.value for k, v in g.peak_tflops.items()}
        # Every catalog GPU does FP32 and FP64; Blackwell Ultra's source (the datasheet as aiconfigurator
        # transcribes it) prints neither, and no figure is made up for them.
        assert ("fp32" in p and "fp64" in p) or g.name in ("B300", "GB300"), g.name
        if "bf16" in p:
            assert p["fp16"] == p["bf16"], g.name
        # Faster formats in order, over the ones the part has.
        order = [p[k] for k in ("fp64", "fp32", "tf32", "fp16") if k in p]
        assert order == sorted(order) and (len(order) == 1 or order[0] < order[-1]), g.name
        assert all(v > 0 for v in p.values()), g.name


def test_memory_in_range(cat):
    for g in _gpus(cat):
        mem = g.memory
        assert 11 <= mem.capacity_gib.value <= 300, g.name     # one K80 GK210 has 12 GB
        if mem.type.upper().startswith("HBM"):     # datacenter parts with HBM (P100 HBM2: 732 GB/s)
            assert 0.7 <= mem.bandwidth_tbps.value <= 10, g.name
        else:                                      # GDDR: K80 GK210 240 GB/s .. L40S 864 GB/s
            assert 0.2 <= mem.bandwidth_tbps.value < 1.5, g.name


def test_scale_up_domains(cat):
    for g in _gpus(cat):
        su = g.scale_up
        assert su.domain_size.value in (2, 8, 72), g.name
        assert 10 <= su.bandwidth_gbps_per_direction.value <= 1000, g.name
        if su.in_switch_reduction:
            assert su.switched, g.name


def test_power_and_prices_positive(cat):
    for g in _gpus(cat):
        assert 60 <= g.tdp_w.value <= 1500, g.name      # T4 70 W, L4 72 W
        if g.prices.purchase_usd:
            assert 1000 <= g.prices.purchase_usd.value <= 100_000, g.name
        if g.prices.rental_usd_per_gpu_hour:
            assert 0.1 <= g.prices.rental_usd_per_gpu_hour.value <= 20, g.name


def test_gemm_points_below_peak(cat):
    for g in _gpus(cat):
        for pt in g.efficiency.gemm:
            assert pt.tflops < g.peak_tflops[pt.precision].value, (g.name, pt)
        if g.efficiency.hbm_fraction:
            assert 0.5 < g.efficiency.hbm_fraction.value < 1, g.name


def test_links_name_entries_in_links_yaml(cat):
    for g in _gpus(cat):
        link = cat.links.get(g.scale_up.link)
        assert link.kind == "scale-up", g.name
    for name, nic in cat.nics.items():
        link = cat.links.get(nic.link)
        assert link.kind == "scale-out", name


def test_nic_fabric_matches_link(cat):
    expected = {"infiniband": "InfiniBand", "roce": "RoCE", "ethernet": "Ethernet"}
    for name, nic in cat.nics.items():
        assert cat.links.canonical(nic.link) == expected[nic.fabric], name
        assert nic.line_rate_gbit.value in (10, 25, 100, 200, 400, 800), name


# --- switches and CPUs ------------------------------------------------------------------------

def test_switch_capacity(cat):
    # One-ASIC boxes span a 25G ToR (1.2 Tbit/s of server ports) to Quantum-X800 (115.2 Tbit/s).
    for name, sw in cat.switches.items():
        tbit = sw.radix.value * sw.port_gbit.value / 1000
        assert 1 <= tbit <= 120, (name, tbit)
        assert sw.radix.value == int(sw.radix.value), name
        assert sw.power_w.value > 0, name


# FP32 FLOP/cycle per core by microarchitecture (2 FMA x lanes x 2).
FLOPS_PER_CYCLE = {"zen2": 32, "zen4": 32, "zen4c": 32, "sapphire-rapids": 64,
                   "granite-rapids": 64, "neoverse-v2": 32}
CPU_FAMILY = {"EPYC-9654": "zen4", "EPYC-9754": "zen4c", "EPYC-7742": "zen2",
              "Xeon-8480+": "sapphire-rapids", "Xeon-6980P": "granite-rapids", "Grace": "neoverse-v2"}


def test_cpu_families_known(cat):
    assert set(cat.cpus.names()) == set(CPU_FAMILY)


@pytest.mark.parametrize("name", sorted(CPU_FAMILY))
def test_cpu_peak_flops(cat, name):
    cpu = cat.cpus.get(name)
    expected = cpu.cores.value * cpu.boost_ghz.value * FLOPS_PER_CYCLE[CPU_FAMILY[name]] / 1000
    assert cpu.peak_fp32_tflops.value == pytest.approx(expected, rel=0.05)
    assert cpu.base_ghz.value <= cpu.boost_ghz.value
    assert 100 <= cpu.memory_bandwidth_gbps.value <= 1000


def test_seed_cpu_present(cat):
    assert cat.cpus.get("EPYC-9654").cores.value == 96
    assert cat.cpus.get("Grace").cores.value == 72


# --- broken entries are reported as UserError with file and field ----------------------------

def _broken_catalog(tmp_path: Path, edit) -> tuple[Catalog, Path]:
    """A copy of the data dir whose H200 file has been passed through `edit(dict)`."""
    (tmp_path / "gpus").mkdir()
    for f in DATA_DIR.glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    src = DATA_DIR / "gpus" / "H200-SXM-141GB.yaml"
    data = yaml.safe_load(src.read_text())
    edit(data)
    dst = tmp_path / "gpus" / src.name
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return Catalog(data_dir=tmp_path), dst


def test_copy_of_data_loads(tmp_path):
    cat, _ = _broken_catalog(tmp_path, lambda d: None)
    assert cat.gpus.get("H200").name == "H200-SXM-141GB"
    assert len(cat.nics) and len(cat.switches) and len(cat.cpus)


def test_typo_in_source_id(tmp_path):
    def edit(d):
        d["memory"]["capacity_gib"]["source"] = "nvidia-smy"
    cat, path = _broken_catalog(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _ = cat.gpus  # loading the table is what raises
    assert exc.value.file == str(path)
    assert "nvidia-smy" in exc.value.reason


def test_typo_in_source_id_names_field(tmp_path):
    def edit(d):
        d["memory"]["capacity_gib"]["source"] = "nvidia-smy"
    cat, _ = _broken_catalog(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _ = cat.gpus  # loading the table is what raises
    assert exc.value.field == "memory.capacity_gib.source"


def test_negative_gemm_value(tmp_path):
    def edit(d):
        d["efficiency"]["gemm"][0]["tflops"] = -290.8
    cat, path = _broken_catalog(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _ = cat.gpus  # loading the table is what raises
    assert exc.value.file == str(path)
    assert exc.value.field == "efficiency.gemm[0].tflops"
    assert exc.value.line is not None


def test_misspelt_field(tmp_path):
    def edit(d):
        d["memory"]["bandwith_tbps"] = d["memory"].pop("bandwidth_tbps")
    cat, path = _broken_catalog(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _ = cat.gpus  # loading the table is what raises
    assert exc.value.file == str(path)
    assert exc.value.field in ("memory.bandwith_tbps", "memory.bandwidth_tbps")


def test_negative_sourced_value(tmp_path):
    def edit(d):
        d["peak_tflops"]["bf16"]["value"] = -989.4
    cat, _ = _broken_catalog(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _ = cat.gpus  # loading the table is what raises
    assert exc.value.field == "peak_tflops.bf16.value"


def test_broken_nic_entry_names_entry(tmp_path):
    (tmp_path / "gpus").mkdir()
    for f in DATA_DIR.glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    nics = tmp_path / "nics.yaml"
    nics.write_text(nics.read_text().replace("fabric: infiniband", "fabric: infiniband-hdr", 1))
    with pytest.raises(UserError) as exc:
        _ = Catalog(data_dir=tmp_path).nics  # loading the table is what raises
    assert exc.value.file == str(nics)
    assert exc.value.field == "entries[0].fabric"


def test_aliases_are_unique_across_gpus(cat):
    seen: dict[str, str] = {}
    for name, g in cat.gpus.items():
        for n in (name, *g.aliases):
            key = n.lower().replace("_", "-")
            assert seen.setdefault(key, name) == name, (n, seen[key], name)
