"""Gavel's throughput tables and traces: the reader, the fill rule, run time = steps / throughput."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.errors import UserError
from gpucluster.sim.throughputs import catalog_name, default_table, read_table
from gpucluster.sim.traces import read
from gpucluster.sim.traces.gavel import read_gavel

DATA = Path(__file__).parent / "data"
T2019 = DATA / "gavel_throughputs_2019_sample.json"     # a subset of gavel's oracle_throughputs.json (2019)
TSCALE = DATA / "gavel_throughputs_scale_sample.json"   # a subset of gavel's simulation_throughputs.json
SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"


def test_2019_table_alone_and_packed():
    t = read_table(T2019)
    assert t.layout == "2019" and not t.scale_aware
    assert t.gpus == ["v100", "p100", "k80"]
    raw = json.loads(T2019.read_text())
    jt = "ResNet-18 (batch size 32)"
    assert t.throughput(jt, "k80") == raw["k80"][jt]["null"]
    # Gavel 2019: a k-GPU job runs at the single-GPU figure
    assert t.throughput(jt, "v100", scale=8) == raw["v100"][jt]["null"]
    other = "LM (batch size 20)"
    assert t.pair(jt, other, "p100") == tuple(raw["p100"][jt][other])
    assert t.throughput("A3C", "v100") == 0.0 and t.filled == 0


def test_scale_table_fills_missing_pairs_by_the_documented_rule():
    t = read_table(TSCALE)
    assert t.layout == "scale" and t.scale_aware
    raw = json.loads(TSCALE.read_text())
    rn = "ResNet-18 (batch size 32)"
    # measured pairs are read as they are
    assert t.throughput(rn, "v100", 4) == raw["v100"][str((rn, 4))]["null"]
    assert t.throughput(rn, "v100", 4, spread=True) == raw["v100_unconsolidated"][str((rn, 4))]["null"]
    # A3C has only 1 GPU: 2, 4, 8, 16, 32 filled; ResNet-18 has up to 8: 16 and 32 filled; per GPU key
    assert t.filled == 4 * (5 + 2)
    # one doubling: x 2 x min(1, median efficiency of the measured 1 -> 2 doubling on that key)
    eff = min(1.0, raw["k80"][str((rn, 2))]["null"] / (2 * raw["k80"][str((rn, 1))]["null"]))
    assert t.throughput("A3C", "k80", 2) == pytest.approx(raw["k80"][str(("A3C", 1))]["null"] * 2 * eff)
    # beyond the largest measured doubling, its efficiency carries on; never super-linear
    for g in ("v100", "p100", "k80"):
        assert t.throughput(rn, g, 16) <= 2 * t.throughput(rn, g, 8) + 1e-9
        assert t.throughput(rn, g, 32) > t.throughput(rn, g, 16) > t.throughput(rn, g, 8)
    assert "median" in t.fill_rule and t.report()["filled"] == t.filled


@pytest.mark.parametrize("body, reason", [
    ("{not json", "not JSON"),
    ("[1, 2]", "GPU type -> job type"),
    ('{"v100": {"A": {"alone": 1}}}', 'expected an object with a "null"'),
    ('{"v100": {"A": {"null": -3}}}', "non-negative number"),
    ('{"v100": {"A": {"null": "fast"}}}', "non-negative number"),
    ('{"v100": {"(\'A\', 0)": {"null": 1}}}', "is not \"('<job type>', <scale factor>)\""),
    ('{"v100": {"A": {"null": 1, "B": [1]}}}', "a packed pair is"),
])
def test_bad_table_is_one_line_error(tmp_path, body, reason):
    p = tmp_path / "t.json"
    p.write_text(body)
    with pytest.raises(UserError) as e:
        read_table(p)
    assert reason in e.value.message and str(p) in e.value.message and "\n" not in e.value.message


def test_missing_table_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="throughput table not found"):
        read_table(tmp_path / "nope.json")


def test_trace_duration_is_steps_over_throughput():
    got = read_gavel(str(DATA / "sample.trace"), throughputs=str(T2019))
    raw = json.loads(T2019.read_text())
    assert got.format.startswith("gavel (throughputs")
    assert [j.gpus for j in got.jobs] == [1, 2, 4, 8]
    assert sum(got.bad.values()) == 2
    for j in got.jobs:
        assert j.speeds == {g: raw[g][j.job_type]["null"] for g in ("v100", "p100", "k80")}
        assert j.duration == pytest.approx(j.steps / max(j.speeds.values()))
        # on every type: steps / throughput there
        for v in j.speeds.values():
            assert j.steps / v >= j.duration


def test_trace_job_type_missing_from_the_table_is_a_bad_row(tmp_path):
    p = tmp_path / "t.trace"
    p.write_text("A3C\tcmd\t-n\t1\t1000\t0\t1\nLM (batch size 20)\tcmd\t-n\t1\t1000\t10\t1\n")
    got = read_gavel(str(p), throughputs=str(T2019))
    assert len(got.jobs) == 1 and got.bad["job type not in the throughput table"] == 1


def test_without_a_table_the_rank_approximation_is_named():
    got = read("gavel", str(DATA / "sample.trace"))   # tests/sim/data has philly_runtime.csv, no table
    assert "by rank" in got.format


def test_default_table_is_found_beside_the_shared_traces():
    trace = SHARED / "philly" / "2869ce.trace"
    if not trace.is_file():
        pytest.skip("../shared/traces/philly/2869ce.trace not beside this checkout")
    assert default_table(trace) == (SHARED / "gavel" / "oracle_throughputs_2019.json").resolve()
    got = read("gavel", str(trace))
    assert len(got.jobs) == 533 and all(j.speeds for j in got.jobs)


def test_gavel_gpu_names_resolve_through_catalog_aliases():
    assert catalog_name("v100") == "V100-SXM2-16GB"
    assert catalog_name("not-a-gpu-xyz") == "not-a-gpu-xyz"


def _training_scenario(tmp_path, job_type: str):
    from gpucluster.specs.scenario import load_scenario
    p = tmp_path / "s.yaml"
    p.write_text(f"""
name: typed
cluster:
  name: mixed
  fabric: {{topology: fat-tree, switch: QM9700}}
  node_pools:
    - {{name: v100, count: 2, gpu: "v100:1", cpu_cores: 8, ram_gib: 61, nics_per_node: 1, nic: NDR400}}
    - {{name: k80, count: 2, gpu: "k80:1", cpu_cores: 4, ram_gib: 61, nics_per_node: 1, nic: NDR400}}
policy: max_min_fairness_perf
workloads:
  - kind: training
    name: resnet
    arrivals: {{per_day: 24, count: 4}}
    gpus: 1
    duration_hours: 2
    job_type: "{job_type}"
    throughputs: {T2019}
""")
    return load_scenario(p)


def test_training_workload_names_a_job_type_and_gets_table_speeds(tmp_path):
    from gpucluster.sim.run import build
    sim = build(_training_scenario(tmp_path, "ResNet-18 (batch size 32)"))
    raw = json.loads(T2019.read_text())["k80"]["ResNet-18 (batch size 32)"]["null"]
    ref = json.loads(T2019.read_text())["v100"]["ResNet-18 (batch size 32)"]["null"]
    for j in sim.by_id.values():
        assert j.speeds["V100-SXM2-16GB"] == 1.0
        assert j.speeds["K80"] == pytest.approx(raw / ref)


def test_training_workload_unknown_job_type_lists_the_table_types(tmp_path):
    from gpucluster.sim.run import build
    with pytest.raises(UserError) as e:
        build(_training_scenario(tmp_path, "ResNet-9000"))
    assert "unknown job type 'ResNet-9000'" in e.value.message and "ResNet-18 (batch size 32)" in e.value.message
    assert "job_type" in e.value.message
