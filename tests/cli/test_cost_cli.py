"""`gpucluster cost`, `reliability` and `facility` through the real console script."""

import json

from tests_cli_helpers import assert_one_line_error, run


def test_cost_json_and_provenance():
    data = json.loads(run("cost", "examples/ng8-32node.yaml", "--json", check_rc=0).stdout)
    assert data["schema"] == "gpucluster-cost/v1" and data["gpus"] == 256
    assert abs(data["capex_usd"] - sum(i["total_usd"] for i in data["capex"])) < 1e-6
    assert all(i["origin"] for i in data["capex"] + data["opex_per_year"])
    assert {r["option"] for r in data["rent"]} == {"on-demand", "reserved", "spot"}
    assert data["tco_usd"] == data["capex_usd"] + 3 * data["opex_usd_per_year"]


def test_cost_with_run_serving_and_overrides():
    data = json.loads(run("cost", "examples/h200-256-ndr400.yaml", "--model", "llama2-7b", "--tokens", "100B",
                          "--serve-tokens-per-s", "10000", "--price", "fte_usd_per_year=1", "--json",
                          check_rc=0).stdout)
    tr = data["training_run"]
    assert 0 < tr["goodput"] <= 1 and tr["rent_usd"] > 0 and tr["wall_s"] > 0
    assert data["serving"]["gpus"] == 8 and data["serving"]["rent_usd_per_million_tokens"] > 0
    staff = next(i for i in data["opex_per_year"] if i["category"] == "staff")
    assert staff["unit_usd"] == 1 and "--price" in staff["origin"]


def test_cost_human():
    out = run("cost", "examples/seed-figures/min-8xh200.yaml", check_rc=0).stdout
    assert "Build or rent" in out and "break-even" in out and "Sources" in out


def test_cost_bad_input():
    assert_one_line_error(run("cost", "examples/ng8-32node.yaml", "--price", "fte=abc"), "--price")
    assert_one_line_error(run("cost", "examples/ng8-32node.yaml", "--price", "fte_usd=1"), "unknown price")
    assert_one_line_error(run("cost", "examples/ng8-32node.yaml", "--utilization", "2"), "--utilization")
    assert_one_line_error(run("cost", "examples/ng8-32node.yaml", "--prices", "nope.yaml"), "nope.yaml")


def test_reliability_json():
    data = json.loads(run("reliability", "examples/ng8-32node.yaml", "--interval", "30m", "--json",
                          check_rc=0).stdout)
    assert data["profile"] == "llama3"
    rows = {r["gpus"]: r["mtbf_h"] for r in data["mtbf_by_gpus"]}
    assert abs(rows[16384] - 3.09) < 0.01
    job = data["job"]
    assert job["gpus"] == 256 and job["best"] in {o["tier"] for o in job["options"]}
    assert all(0 < o["goodput"] <= 1 and o["given_interval_s"] == 1800 for o in job["options"])


def test_reliability_table_without_cluster():
    out = run("reliability", "--profile", "opt-175b", "--gpus", "2048", check_rc=0).stdout
    assert "6.0 h" in out and "seed says" in out
    assert_one_line_error(run("reliability", "--profile", "llama4"), "llama3")
    assert_one_line_error(run("reliability", "examples/ng8-32node.yaml", "--interval", "soon"), "--interval")


def test_facility():
    data = json.loads(run("facility", "examples/ng8-32node.yaml", "--json", check_rc=0).stdout)
    [rack] = data["racks"]
    assert rack["nodes_per_rack"] == 4 and abs(rack["node_kw"] - 10.2) < 0.01
    out = run("facility", "examples/mixed-h100-h200-mi300x.yaml", check_rc=0).stdout
    assert "mi300x" in out and "A per phase" in out


def test_facility_storage_needs():
    data = json.loads(run("facility", "examples/ng8-32node.yaml", "--model", "llama3-70b", "--input-gbps-per-gpu",
                          "0.3", "--json", check_rc=0).stdout)
    st = data["storage"]
    assert abs(st["input_gbps"] - 256 * 0.3) < 1e-9
    tiers = {t["tier"]: t for t in st["tiers"]}
    assert tiers["s3"]["input_share"] > 1 > tiers["lustre"]["input_share"]     # 76.8 GB/s vs 50 and 200
    assert all(0 < t["write_share"] < 1 for t in st["tiers"])
