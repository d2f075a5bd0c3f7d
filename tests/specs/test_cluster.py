"""Cluster specs: the examples load, dump and reload unchanged; bad input is one clear line."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.specs.cluster import ClusterSpec, NodePool, Prices, dump_cluster, load_cluster
from gpucluster.specs.loader import load_yaml_text, parse_data

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
EXPECTED = {  # file: (nodes, GPUs)
    "ng8-32node": (32, 256),
    "h100-64-ib": (8, 64),
    "h200-256-ndr400": (32, 256),
    "h200-256-100gbe": (32, 256),
    "mixed-h100-h200-mi300x": (40, 320),
    "gavel-36-36-36": (108, 108),     # Gavel's 36 V100 + 36 P100 + 36 K80, one GPU per server
}


def reload(spec: ClusterSpec) -> ClusterSpec:
    data, lines = load_yaml_text(dump_cluster(spec), "dumped.yaml")
    return parse_data(ClusterSpec, data, "dumped.yaml", lines)


def minimal(**pool) -> dict:
    return {
        "name": "t",
        "node_pools": [{"name": "p", "count": 4, "gpu": "H100", "gpus_per_node": 8, "cpu_cores": 64,
                        "ram_gib": 1024, "nics_per_node": 8, "nic": "NDR400", **pool}],
        "fabric": {"switch": "QM9700"},
    }


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cluster.yaml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, data_or_text) -> UserError:
    text = data_or_text if isinstance(data_or_text, str) else yaml.safe_dump(data_or_text, sort_keys=False)
    p = write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_cluster(p)
    assert "\n" not in exc.value.message
    assert exc.value.message.startswith(str(p))
    return exc.value


# --- examples ------------------------------------------------------------------------------

def test_all_examples_present():
    assert {p.stem for p in EXAMPLES} == set(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_loads(path):
    spec = load_cluster(path)
    assert (spec.total_nodes, spec.total_gpus) == EXPECTED[path.stem]
    assert spec.facility is not None and spec.storage
    text = path.read_text()
    assert "seed" in text.lower()  # every example says which seed claim it encodes


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_round_trips(path, tmp_path):
    spec = load_cluster(path)
    assert reload(spec) == spec
    out = write(tmp_path, dump_cluster(spec))
    assert load_cluster(out) == spec
    assert dump_cluster(load_cluster(out)) == dump_cluster(spec)


def test_ng8_encodes_seed_node():
    spec = load_cluster(ROOT / "examples/ng8-32node.yaml")
    p = spec.pool("ng8")
    assert p.gpu == "H200-SXM-141GB" and p.gpus_per_node == 8
    assert (p.cpu_sockets, p.cpu_cores, p.ram_gib) == (2, 192, 1536)
    assert p.local_nvme_tb == pytest.approx(4 * 15.36)
    assert (p.nics_per_node, p.nic, spec.fabric.switch) == (8, "NDR400", "QM9700")
    assert [t.kind for t in spec.storage] == ["local-nvme", "parallel-fs", "object"]
    lustre = spec.storage[1]
    assert (lustre.read_gbps, lustre.capacity_tb) == (200, 5000)
    assert spec.storage[2].capacity_tb == 100_000
    assert spec.prices.node_purchase_usd == 380_000


def test_100gbe_example_is_one_ethernet_port():
    spec = load_cluster(ROOT / "examples/h200-256-100gbe.yaml")
    p = spec.node_pools[0]
    assert (p.nics_per_node, p.nic, p.gpu, p.gpus_per_node) == (1, "Ethernet-100G", "H200-SXM-141GB", 8)


def test_h100_example_storage_nic():
    p = load_cluster(ROOT / "examples/h100-64-ib.yaml").pool("h100")
    assert p.storage_nic is not None
    assert p.nic == "HDR200" and p.storage_nic.nic == "RoCE-200G" and p.storage_nic.count == 4


# --- names and shorthands --------------------------------------------------------------------

def test_aliases_become_canonical_names():
    spec = ClusterSpec.model_validate(minimal(gpu="H100", nic="ConnectX-7") | {"fabric": {"switch": "MQM9700"}})
    assert spec.node_pools[0].gpu == "H100-SXM5-80GB"
    assert spec.node_pools[0].nic == "NDR400"
    assert spec.fabric.switch == "QM9700"


def test_skypilot_form_sets_gpus_per_node():
    pool = minimal(gpu="H100:8")["node_pools"][0]
    del pool["gpus_per_node"]
    a = NodePool.model_validate(pool)
    b = NodePool.model_validate({**pool, "gpu": "H100-SXM5-80GB", "gpus_per_node": 8})
    assert a == b
    assert NodePool.model_validate({**pool, "gpus_per_node": 8}) == b  # agreeing duplicate is fine


def test_skypilot_form_conflict(tmp_path):
    e = error_of(tmp_path, minimal(gpu="H100:8", gpus_per_node=4))
    assert e.field == "node_pools[0]" and "8 GPUs per node but gpus_per_node is 4" in e.reason


def test_skypilot_zero_count(tmp_path):
    e = error_of(tmp_path, minimal(gpu="H100:0"))
    assert "positive integer" in e.reason


def test_gpus_per_node_required_without_shorthand(tmp_path):
    data = minimal()
    del data["node_pools"][0]["gpus_per_node"]
    e = error_of(tmp_path, data)
    assert e.field == "node_pools[0].gpus_per_node"


# --- bad input ----------------------------------------------------------------------------------

def test_yaml_syntax_error_has_line(tmp_path):
    text = "name: t\nnode_pools:\n  - name: p\n    count: [4\nfabric: {switch: QM9700}\n"
    e = error_of(tmp_path, text)
    assert "YAML syntax error" in e.reason
    assert e.line is not None and 4 <= e.line <= 5
    assert f":{e.line}: " in e.message


def test_unknown_gpu_names_field_line_and_suggests(tmp_path):
    text = yaml.safe_dump(minimal(gpu="H100-SMX5-80GB"), sort_keys=False)
    e = error_of(tmp_path, text)
    assert e.field == "node_pools[0].gpu"
    assert e.line == next(i for i, ln in enumerate(text.splitlines(), 1) if "gpu:" in ln)
    assert "unknown GPU 'H100-SMX5-80GB'" in e.reason
    assert "did you mean H100-SXM5-80GB" in e.reason
    assert "H200-SXM-141GB" in e.reason  # the valid names are listed


def test_unknown_nic(tmp_path):
    e = error_of(tmp_path, minimal(nic="NDR4000"))
    assert e.field == "node_pools[0].nic" and "unknown NIC 'NDR4000'" in e.reason and "NDR400" in e.reason


def test_unknown_switch(tmp_path):
    data = minimal() | {"fabric": {"switch": "QM9701"}}
    e = error_of(tmp_path, data)
    assert e.field == "fabric.switch" and "unknown switch" in e.reason and "QM9700" in e.reason


@pytest.mark.parametrize("field", ["count", "gpus_per_node", "nics_per_node", "cpu_cores"])
def test_zero_counts_rejected(tmp_path, field):
    e = error_of(tmp_path, minimal(**{field: 0}))
    assert e.field == f"node_pools[0].{field}"
    assert "greater than or equal to 1" in e.reason


def test_no_pools(tmp_path):
    e = error_of(tmp_path, minimal() | {"node_pools": []})
    assert e.field == "node_pools"


def test_duplicate_pool_names(tmp_path):
    data = minimal()
    data["node_pools"].append(dict(data["node_pools"][0]))
    e = error_of(tmp_path, data)
    assert e.field == "node_pools" and "duplicate node pool name 'p'" in e.reason


def test_duplicate_storage_names(tmp_path):
    tier = {"kind": "nfs", "name": "a", "capacity_tb": 1, "read_gbps": 1, "write_gbps": 1, "latency_ms": 1}
    e = error_of(tmp_path, minimal() | {"storage": [tier, tier]})
    assert e.field == "storage" and "duplicate storage tier" in e.reason


def test_unknown_field(tmp_path):
    e = error_of(tmp_path, minimal(gpus=8))
    assert e.field == "node_pools[0].gpus" and "unknown field" in e.reason


@pytest.mark.parametrize("ratio", [0.5, 0, -1])
def test_oversubscription_below_one(tmp_path, ratio):
    e = error_of(tmp_path, minimal() | {"fabric": {"switch": "QM9700", "oversubscription": ratio}})
    assert e.field == "fabric.oversubscription"


def test_infiniband_nic_on_ethernet_switch(tmp_path):
    e = error_of(tmp_path, minimal() | {"fabric": {"switch": "SN4600C"}})
    assert e.field == "fabric" and "InfiniBand NICs need InfiniBand switches" in e.reason


def test_rail_topology_needs_rail_pools(tmp_path):
    e = error_of(tmp_path, minimal() | {"fabric": {"switch": "QM9700", "topology": "rail-optimized"}})
    assert e.field == "fabric" and "rail_optimized: false" in e.reason


def test_single_switch_too_small(tmp_path):
    e = error_of(tmp_path, minimal(count=9) | {"fabric": {"switch": "QM9700", "topology": "single-switch"}})
    assert e.field == "fabric" and "72 NIC ports exceed one 64-port switch" in e.reason


def test_single_switch_with_levels(tmp_path):
    e = error_of(tmp_path, minimal() | {"fabric": {"switch": "QM9700", "topology": "single-switch", "levels": 2}})
    assert "single-switch has 1 level" in e.reason


def test_fabric_levels_too_few(tmp_path):
    # 1024 nodes x 8 NICs on 64-port switches need 3 levels
    text = yaml.safe_dump(minimal(count=1024) | {"fabric": {"switch": "QM9700", "levels": 2}}, sort_keys=False)
    e = error_of(tmp_path, text)
    assert e.field == "fabric" and "use levels: 3" in e.reason
    assert e.line == text.splitlines().index("fabric:") + 1


def test_fabric_too_big_for_three_levels(tmp_path):
    # QM8700: 40 ports, 3 levels hold 40 * 20 * 20 = 16,000 ports; 2,001 nodes x 8 = 16,008
    data = minimal(count=2001, nic="HDR200") | {"fabric": {"switch": "QM8700"}}
    e = error_of(tmp_path, data)
    assert "larger-radix switch" in e.reason


def test_errors_carry_line_numbers(tmp_path):
    text = yaml.safe_dump(minimal(count=0), sort_keys=False)
    e = error_of(tmp_path, text)
    assert e.line == next(i for i, ln in enumerate(text.splitlines(), 1) if "count:" in ln)


# --- scale-up domain -----------------------------------------------------------------------------

def test_domain_defaults():
    pool = minimal()["node_pools"][0]
    assert NodePool.model_validate(pool).domain_size == 8
    assert NodePool.model_validate({**pool, "gpus_per_node": 4}).domain_size == 4  # 4-GPU board
    assert NodePool.model_validate({**pool, "gpus_per_node": 16}).domain_size == 8  # two boards
    pcie = NodePool.model_validate({**pool, "gpu": "H100-PCIe"})
    assert pcie.domain_size == 2  # bridged pairs


def test_rack_scale_domain_spans_nodes():
    pool = minimal(gpu="GB200", gpus_per_node=4, count=36)["node_pools"][0]
    assert NodePool.model_validate(pool).domain_size == 72
    assert NodePool.model_validate({**pool, "count": 9}).domain_size == 36  # half a rack
    assert NodePool.model_validate({**pool, "scale_up_domain": 36}).domain_size == 36  # NVL36x2


def test_domain_must_tile_nodes(tmp_path):
    e = error_of(tmp_path, minimal(gpus_per_node=8, scale_up_domain=12))
    assert "not a whole number of 8-GPU nodes" in e.reason
    e = error_of(tmp_path, minimal(gpus_per_node=8, scale_up_domain=3))
    assert "do not split into scale-up domains of 3" in e.reason


# --- helpers, schema ------------------------------------------------------------------------------

def test_helpers_and_prices():
    spec = load_cluster(ROOT / "examples/mixed-h100-h200-mi300x.yaml")
    assert spec.total_nodes == 40 and spec.total_gpus == 320
    assert spec.pool("mi300x").gpu == "MI300X"
    with pytest.raises(UserError, match=r"unknown node pool 'mi355x'.*mi300x"):
        spec.pool("mi355x")
    merged = spec.pool_prices("h200")
    assert merged.node_purchase_usd == 380_000 and merged.switch_purchase_usd == 17_500
    assert spec.pool_prices("h100") == spec.prices
    assert Prices(gpu_purchase_usd=1).merged_over(Prices(gpu_purchase_usd=2, node_purchase_usd=3)) == \
        Prices(gpu_purchase_usd=1, node_purchase_usd=3)


def test_frozen():
    spec = ClusterSpec.model_validate(minimal())
    with pytest.raises(ValidationError, match="frozen"):
        spec.name = "x"  # type: ignore[misc]  # assigning to the frozen spec is what is tested


def test_json_schema():
    schema = ClusterSpec.model_json_schema()
    json.dumps(schema)
    pool = schema["$defs"]["NodePool"]
    assert pool["additionalProperties"] is False
    assert "GiB" in pool["properties"]["ram_gib"]["description"]
    assert set(schema["required"]) == {"name", "node_pools", "fabric"}
    assert schema["$defs"]["Fabric"]["properties"]["topology"]["enum"] == \
        ["fat-tree", "rail-optimized", "single-switch"]


# --- property: any valid spec survives dump -> load -------------------------------------------

NAME = st.text(alphabet=string.ascii_letters + string.digits + " -_:.#'\"!&*", min_size=1, max_size=12)
POS = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
OPT_PRICE = st.none() | st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)


@st.composite
def pools(draw):
    names = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    fabric = draw(st.sampled_from([("infiniband", ["HDR200", "NDR400", "XDR800"]),
                                   ("ethernet", ["RoCE-400G", "Ethernet-100G", "Ethernet-400G"])]))
    out = []
    for name in names:
        gpu = draw(st.sampled_from(sorted(catalog.gpus.names())))
        gpn = draw(st.sampled_from([1, 2, 4, 8]))
        shorthand = draw(st.booleans())
        pool = {"name": name, "count": draw(st.integers(1, 300)),
                "gpu": f"{gpu}:{gpn}" if shorthand else gpu,
                "cpu_cores": draw(st.integers(1, 512)), "ram_gib": draw(POS),
                "local_nvme_tb": draw(st.floats(0, 1000, allow_nan=False)),
                "nics_per_node": draw(st.integers(1, 8)), "nic": draw(st.sampled_from(fabric[1])),
                "rail_optimized": draw(st.booleans())}
        if not shorthand:
            pool["gpus_per_node"] = gpn
        if draw(st.booleans()):
            pool["cpu"] = draw(NAME)
            pool["cpu_sockets"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            pool["storage_nic"] = {"nic": draw(st.sampled_from(["RoCE-200G", "Ethernet-100G"])),
                                   "count": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            pool["prices"] = {"gpu_purchase_usd": draw(OPT_PRICE), "usd_per_gpu_hour": draw(OPT_PRICE)}
        out.append(pool)
    return fabric[0], out


@st.composite
def specs(draw):
    kind, node_pools = draw(pools())
    switch = draw(st.sampled_from(["QM9700", "Q3400"] if kind == "infiniband" else ["SN5600", "SN5600-400G"]))
    fabric = {"switch": switch,
              "oversubscription": draw(st.floats(1, 8, allow_nan=False)),
              "topology": draw(st.sampled_from(["fat-tree", "rail-optimized"]))}
    if fabric["topology"] == "rail-optimized":
        for p in node_pools:
            p["rail_optimized"] = True
    if not any(p["rail_optimized"] for p in node_pools) and draw(st.booleans()):
        fabric["nodes_per_leaf"] = draw(st.integers(1, 4))  # rail pools with few nodes per leaf need 1000s of leaves
    data = {"name": draw(NAME), "node_pools": node_pools, "fabric": fabric,
            "description": draw(st.text(alphabet=string.printable, max_size=40))}
    if draw(st.booleans()):
        data["storage"] = [{"kind": k, "name": f"{k}-{i}", "capacity_tb": draw(POS), "read_gbps": draw(POS),
                            "write_gbps": draw(POS), "latency_ms": draw(st.floats(0, 1e4, allow_nan=False))}
                           for i, k in enumerate(draw(st.lists(
                               st.sampled_from(["local-nvme", "parallel-fs", "object", "nfs"]), max_size=4)))]
    if draw(st.booleans()):
        data["facility"] = {"rack_kw_budget": draw(POS), "nodes_per_rack": draw(st.integers(1, 16)),
                            "voltage_v": draw(st.sampled_from([208, 230, 415, 480])),
                            "phases": draw(st.sampled_from([1, 3])),
                            "pue": draw(st.floats(1, 3, allow_nan=False)),
                            "usd_per_kwh": draw(st.floats(0, 1, allow_nan=False)),
                            "cooling": draw(st.sampled_from(["air", "liquid"]))}
    if draw(st.booleans()):
        data["prices"] = {"switch_purchase_usd": draw(OPT_PRICE), "optical_cable_usd": draw(OPT_PRICE)}
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_dump_load_identity(data):
    spec = ClusterSpec.model_validate(data)
    again = reload(spec)
    assert again == spec
    assert dump_cluster(again) == dump_cluster(spec)
    assert spec.total_gpus == sum(p["count"] * int(p.get("gpus_per_node") or p["gpu"].split(":")[1])
                                  for p in data["node_pools"])


def test_absurd_node_counts_are_refused(tmp_path):
    from gpucluster.errors import UserError
    from gpucluster.specs.cluster import load_cluster

    data = yaml.safe_load(Path("examples/h200-256-ndr400.yaml").read_text())
    data["node_pools"][0]["count"] = 10**30
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="count"):
        load_cluster(str(p))
