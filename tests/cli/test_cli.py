"""The real `gpucluster` console script, as a user runs it."""

import json

from tests_cli_helpers import EXE, assert_one_line_error, run


def test_console_script_is_installed():
    assert EXE.exists(), f"{EXE} missing: install the package (make test does)"


# Start-up time is measured by benchmarks/cli_startup.py (as a ratio to `python -c pass`), not
# asserted here: a wall-clock bound fails on a busy machine.


def test_catalog_lists_and_shows_sources():
    out = run("catalog", check_rc=0).stdout
    for name in ("H100-SXM5-80GB", "H200-SXM-141GB", "MI300X", "NDR400", "QM9700"):
        assert name in out
    one = run("catalog", "H100:8", check_rc=0).stdout
    assert "989.4" in one and "datasheet" in one and "NVIDIA H100" in one
    data = json.loads(run("catalog", "H200", "--json", check_rc=0).stdout)
    assert data["name"] == "H200-SXM-141GB" and data["family"] == "gpu"


def test_catalog_unknown_name_suggests():
    assert_one_line_error(run("catalog", "H1OO"), "unknown catalog entry", "H100")
    # A family's name is not an entry: the error says how to list one.
    assert_one_line_error(run("catalog", "gpus"), "unknown catalog entry", "--kind gpu")
    assert_one_line_error(run("catalog", "switches"), "--kind switch")


def test_schema_cluster_is_json_schema():
    schema = json.loads(run("schema", "cluster", check_rc=0).stdout)
    assert schema["type"] == "object" and "node_pools" in schema["properties"]
    for kind, field in (("model", "layers"), ("scenario", "cluster"), ("validation", "cases")):
        assert field in json.loads(run("schema", kind, check_rc=0).stdout)["properties"], kind
    assert_one_line_error(run("schema", "clustr"), "cluster")


def test_comm_prints_the_nccl_tests_table():
    out = run("comm", "--gpu", "H100:8", "--op", "all_reduce", check_rc=0).stdout
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 31  # 8 B .. 8 GiB, factor 2
    assert rows[0][0] == "8" and rows[-1][0] == str(8 * 2**30)
    assert all(len(r) == 13 for r in rows)
    busbw = [float(r[7]) for r in rows]
    assert busbw == sorted(busbw)
    assert 430 < busbw[-1] < 520
    assert "# Avg bus bandwidth" in out


def test_comm_json_on_a_cluster_spec():
    data = json.loads(run("comm", "--cluster", "examples/h200-256-ndr400.yaml", "--gpus", "64", "--max", "1G",
                          "--json", check_rc=0).stdout)
    assert data["gpus"] == 64 and data["placement"]["domains"] == 8
    assert data["rows"][-1]["size_bytes"] == 2**30
    assert data["rows"][-1]["busbw_gbps"] > 0


def test_comm_bad_input():
    assert_one_line_error(run("comm", "--gpu", "H1000:8"), "--gpu", "unknown GPU", "H100-SXM5-80GB")
    assert_one_line_error(run("comm", "--gpu", "H100:0"), "--gpu", "1 to 1,024")
    assert_one_line_error(run("comm", "--gpu", "H100:8", "--gpus", "12"), "--gpus", "whole nodes")
    assert_one_line_error(run("comm", "--gpu", "H100:8", "--op", "allreduce"), "--op", "all_reduce")
    assert_one_line_error(run("comm", "--gpu", "H100:8", "--max", "lots"), "not a size")
    assert_one_line_error(run("comm"), "--cluster")
    assert_one_line_error(run("comm", "--cluster", "nope.yaml"), "nope.yaml", "file not found")


def test_validate_json_is_one_object(shared_dir, tmp_path):
    future = tmp_path / "future.yaml"
    future.write_text("schema: gpucluster-validation/v1\ncases:\n"
                      "  - {id: f1, kind: storage, measured: {read_gbps: 10}}\n")
    proc = run("validate", str(shared_dir / "validation" / "collective-public.yaml"), str(future), "--json",
               check_rc=0)
    data = json.loads(proc.stdout)
    assert set(data) == {"schema", "cases", "summary", "coverage"} and data["schema"] == "gpucluster-validate/v1"
    coll = [c for c in data["cases"] if c["kind"] == "collective"]
    assert all(set(c) >= {"id", "kind", "metric", "measured", "predicted", "error"} for c in coll)
    assert data["summary"]["collective"]["median_abs_error"] <= 0.10
    later = [c for c in data["cases"] if c["kind"] == "storage"]
    assert later and all(c["predicted"] is None and "not supported yet" in c["reason"] for c in later)


def test_validate_bad_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: gpucluster-validation/v1\ncases:\n  - id: x\n    kind: [\n")
    assert_one_line_error(run("validate", str(bad)), "bad.yaml", "YAML syntax error")


def test_help_is_not_cut_when_piped():
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([str(EXE), "plan", "train", "--help"], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert "…" not in out and "--tp-across-domains" in out
