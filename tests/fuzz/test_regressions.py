"""One test per finding of issue 15 (and 14's duplicate keys) that this slice fixed: hostile names
printed literally, readers bounded, job files that crashed the parsers. In process (fast)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fuzz_cases import EXAMPLES
from fuzz_oracle import classify, run_in_process

CLUSTER = EXAMPLES / "h100-64-ib.yaml"
NAME = "lab [/x] cluster [estimate] \x1b]0;TITLE\x07 \u202e end\\"
NAME_SHOWN = "lab [/x] cluster [estimate] \\x1b]0;TITLE\\x07 \\u202e end\\"
POOL = "pool[a]"
TIER = "[link=file:///etc/passwd]x[/link]"


def run(*argv: str | Path) -> tuple[int | str, str, str]:
    code, out, err = run_in_process([str(a) for a in argv])
    assert classify(code, out, err) == [], (code, out[-2000:], err[-2000:])
    return code, out, err


def one_line_error(*argv: str | Path, needle: str = "") -> str:
    code, _, err = run(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert needle in err, err
    return err


@pytest.fixture(scope="module")
def hostile_cluster(tmp_path_factory) -> Path:
    data = yaml.safe_load(CLUSTER.read_text())
    data["name"], data["node_pools"][0]["name"], data["storage"][0]["name"] = NAME, POOL, TIER
    p = tmp_path_factory.mktemp("c") / "c.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    return p


@pytest.mark.parametrize("argv", [["topology", "--cluster"], ["cost"], ["reliability"], ["facility"], ["check"]])
def test_hostile_names_print_literally(hostile_cluster, argv):
    code, out, _ = run(*argv, hostile_cluster)
    assert code == 0 and NAME_SHOWN in out                  # brackets kept, ESC/BEL/RLO shown as escapes
    assert "\x1b" not in out and "\x07" not in out
    if argv[0] in ("topology", "facility"):
        assert POOL in out
    if argv[0] == "reliability":
        assert TIER in out                                  # a table cell, not a hyperlink


def test_hostile_scenario_and_workload_names(tmp_path):
    data = yaml.safe_load((EXAMPLES / "scenarios" / "failures-256-nodes.yaml").read_text())
    data["name"], data["workloads"][0]["name"], data["horizon_days"] = NAME, POOL, 1
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    code, out, _ = run("simulate", p)
    assert code == 0 and NAME_SHOWN in out and POOL in out


def test_hostile_model_name(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump({"name": NAME, "layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32}))
    assert NAME_SHOWN in run("models", p)[1]


def test_error_lines_carry_no_control_bytes(tmp_path):
    err = one_line_error("topology", "--cluster", tmp_path / "no\x1b]0;T\x07such [/x].yaml", needle="file not found")
    assert "\\x1b]0;T\\x07such [/x].yaml" in err


def test_yaml_bombs_duplicates_and_devices(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
                    + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)))
    one_line_error("topology", "--cluster", bomb, needle="aliases are expanded")
    dup = tmp_path / "dup.yaml"
    dup.write_text(CLUSTER.read_text().replace("    count: 8 ", "    count: 8\n    count: 64 ", 1))
    err = one_line_error("cost", dup, needle="duplicate key")
    assert err.strip() == f"error: {dup}:12: node_pools[0].count: duplicate key (first at line 11)"
    one_line_error("facility", "/dev/zero", needle="is a device, expected a spec")
    one_line_error("check", CLUSTER, "--job", "/dev/zero", needle="is a device")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (4 * 2**20) + b"\n")
    one_line_error("facility", big, needle="larger than 4 MiB")


def test_named_pipe_without_writer_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    one_line_error("topology", "--cluster", fifo, needle="is a named pipe")
    one_line_error("metrics", fifo, needle="is a named pipe")
    one_line_error("check", CLUSTER, "--job", fifo, needle="is a named pipe")


def test_price_flags_refuse_nan_and_inf():
    for value in ("nan", "inf", "-1"):
        one_line_error("cost", CLUSTER, "--price", f"pue={value}", needle="--price")


def check_job(tmp_path: Path, name: str, body: str | bytes) -> str:
    p = tmp_path / name
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    code, out, _ = run("check", CLUSTER, "--job", p, "--rule", "job-parse", "--rule", "deepspeed-batch",
                       "--rule", "k8s-gpus")
    assert code in (0, 1)
    return out


def test_kubernetes_wrong_types_and_nul(tmp_path):
    assert "spec.containers: expected a list, got int 5" in check_job(
        tmp_path, "p.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  containers: 5\n")
    out = check_job(tmp_path, "q.yaml", "apiVersion: v1\nkind: Job\nspec:\n  parallelism: -3\n  template:\n    spec:\n"
                                        "      containers:\n      - env: 7\n        command: python\n")
    assert "pod count" in out and "env: expected a list" in out and "command: expected a list" in out
    assert "#x0000 is not allowed" in check_job(tmp_path, "n.yaml", b"kind: Pod\x00\n")
    assert "duplicate key" in check_job(tmp_path, "d.yaml", "kind: Pod\nkind: Job\n")


@pytest.mark.parametrize("value", ["0", "-8", "NaN", "Infinity", "-Infinity", "8.5", "true", "[8]", "1" + "0" * 30])
def test_deepspeed_batch_sizes(tmp_path, value):
    body = f'{{\n  "train_batch_size": 256,\n  "train_micro_batch_size_per_gpu": {value},\n' \
           f'  "gradient_accumulation_steps": 4\n}}\n'
    out = check_job(tmp_path, "ds.json", body)
    assert "train_micro_batch_size_per_gpu: must be a whole number" in out and "ds.json:3" in out


def test_deepspeed_unreadable_numbers(tmp_path):
    out = check_job(tmp_path, "big.json", '{"train_batch_size": ' + "1" * 5000 + "}")
    assert "not a JSON document gpucluster can read" in out
    assert "nested too deeply" in check_job(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)


def test_long_lines_are_problems_not_minutes_of_shlex(tmp_path):
    out = check_job(tmp_path, "long.sbatch", "#!/bin/bash\n#SBATCH --nodes=2\nsrun " + "a" * 200_000 + "\n")
    assert "long.sbatch:3" in out and "line of 200,005 characters" in out
    out = check_job(tmp_path, "long.env", "NCCL_DEBUG=" + "x" * 100_000 + "\n")
    assert "long.env:1" in out and "not read" in out
    digits = "9" * 6000                                   # int() of this many digits raises in Python
    out = check_job(tmp_path, "digits.sbatch", f"#!/bin/bash\n#SBATCH --nodes={digits}\nsrun python t.py\n")
    assert "#SBATCH --nodes: value of 6,000 characters" in out


def test_json_output_stays_json_with_hostile_names(hostile_cluster):
    code, out, _ = run("topology", "--cluster", hostile_cluster, "--json")
    assert code == 0 and json.loads(out)["cluster"] == NAME


# --- the wrong accepts: each value refused (exit 2) or flagged (a finding, exit 1) ---------

PLAN = Path(__file__).resolve().parent / "data" / "plan-13b.json"


def _plan_with(tmp_path: Path, path: tuple, value: object) -> Path:
    doc = json.loads(PLAN.read_text())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(doc, allow_nan=True))
    return p


@pytest.mark.parametrize("path,value,needle", [
    (("target", "gpus_per_node"), -8, "target.gpus_per_node"), (("target", "nodes"), 0, "target.nodes"),
    (("best", "step_s"), "nan", "best.step_s"), (("best", "step_s"), -1.0, "best.step_s"),
    (("best", "step_s"), float("nan"), "NaN is not a number JSON allows"),
    (("best", "step_s"), float("inf"), "Infinity is not a number JSON allows")])
@pytest.mark.parametrize("generator", ["slurm", "k8s"])
def test_plan_with_impossible_values_writes_nothing(tmp_path, path, value, needle, generator):
    out = tmp_path / "job.out"
    one_line_error("generate", generator, _plan_with(tmp_path, path, value), "-o", out, needle=needle)
    assert not out.exists()


def test_the_fixture_plan_is_accepted():
    code, out, _ = run("generate", "slurm", PLAN)
    assert code == 0 and "#SBATCH --nodes=8" in out and "--gres=gpu:" in out


@pytest.mark.parametrize("value", ["-1", "-5:00", "0.5", "abc", "1:2:3:4", "48h"])
def test_slurm_time_must_be_a_slurm_time(value):
    one_line_error("generate", "slurm", PLAN, "--time", value, needle="--time: not a Slurm time limit")


@pytest.mark.parametrize("value", ["30", "30:00", "48:00:00", "2-00", "2-12:00:00", "UNLIMITED"])
def test_slurm_time_forms_slurm_reads(value):
    code, out, _ = run("generate", "slurm", PLAN, "--time", value)
    assert code == 0 and f"#SBATCH --time={value}" in out


@pytest.mark.parametrize("value", ["nan", "inf", "0", "0.5", "-1"])
def test_pue_must_be_a_finite_number_at_least_1(tmp_path, value):
    one_line_error("cost", CLUSTER, "--price", f"pue={value}", needle="--price")
    p = tmp_path / "p.yaml"
    p.write_text(f"pue: {yaml.safe_dump(float(value)).split()[0]}\n")
    one_line_error("cost", CLUSTER, "--prices", p, needle=f"{p}:1: pue:")


@pytest.mark.parametrize("line", ["usd_per_kwh: .inf", "usd_per_kwh: .nan", "utilization_fraction: 0",
                                  "utilization_fraction: 1.5", "fte_usd_per_year: -1"])
def test_price_file_values_in_range(tmp_path, line):
    p = tmp_path / "p.yaml"
    p.write_text(line + "\n")
    one_line_error("cost", CLUSTER, "--prices", p, needle=f"{p}:1: {line.split(':')[0]}:")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-8", "0"])
def test_deepspeed_train_batch_size_is_flagged(tmp_path, value):
    out = check_job(tmp_path, "ds.json", f'{{\n  "train_batch_size": {value},\n  "train_micro_batch_size_per_gpu": 4\n}}\n')
    assert "train_batch_size: must be a whole number" in out and "ds.json:2" in out


COLLECTIVE = {"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "world_size": 16, "nodes": 2,
              "rows": [{"size_bytes": 1048576, "time_us": 120.5, "algbw_gbps": 8.7, "busbw_gbps": 16.3}]}


@pytest.mark.parametrize("field,value", [("busbw_gbps", -16.3), ("algbw_gbps", float("nan")), ("time_us", float("inf")),
                                         ("time_us", -1)])
def test_metrics_never_exports_negative_or_nan(tmp_path, field, value):
    doc = json.loads(json.dumps(COLLECTIVE))
    doc["rows"][0][field] = value
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc, allow_nan=True))
    one_line_error("metrics", p, needle=f"rows[0].{field}")
    storage = {"schema": "gpucluster-bench-storage/v1", "path": "/x", "write_gbps": -1.0, "read_gbps": float("nan")}
    p.write_text(json.dumps(storage, allow_nan=True))
    one_line_error("metrics", p, needle="write_gbps: must be a finite number >= 0")
    sim: dict[str, Any] = {"schema": "gpucluster-simulation/v1", "scenario": "s", "gpu_hours": {"useful": value}}
    p.write_text(json.dumps(sim, allow_nan=True))
    one_line_error("metrics", p, needle="gpu_hours.useful: must be a finite number >= 0")
    sim = {"schema": "gpucluster-simulation/v1", "jobs": {"completed": [[1]], "not_run": {"no capacity": 2}}}
    p.write_text(json.dumps(sim))                   # fuzz case 507: a list where a count belongs was skipped
    one_line_error("metrics", p, needle="jobs.completed: must be a whole number >= 0")
    sim["jobs"]["completed"] = -0.0                 # fuzz case 5057: a count of -0.0 jobs
    p.write_text(json.dumps(sim))
    one_line_error("metrics", p, needle="jobs.completed: must be a whole number >= 0")


# --- YAML readers: size in values, a value that cannot be built, standard input ---------------------

def test_large_alias_free_yaml_is_refused_before_it_is_built(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("name: x\nvalues: [" + ",".join(["1"] * 1_500_000) + "]\n")     # 3 MiB: 1.5M values
    one_line_error("topology", "--cluster", p, needle="big.yaml:2: more than 250,000 values")
    p.write_text("".join(f"k{i}: {i}\n" for i in range(200_000)))                 # 400,000 values in lines
    one_line_error("facility", p, needle="more than 250,000 values")


def test_shipped_data_is_far_below_the_value_cap():
    from gpucluster.specs.safe_yaml import MAX_WRITTEN
    for path in [*EXAMPLES.glob("**/*.yaml"), *(Path(__file__).resolve().parents[2] / "src" / "gpucluster"
                                                / "catalog" / "data").glob("*.yaml")]:
        events = sum(1 for e in yaml.parse(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                     if isinstance(e, (yaml.ScalarEvent, yaml.CollectionStartEvent)))
        assert events * 4 < MAX_WRITTEN, path


def test_a_value_that_cannot_be_built_names_its_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(CLUSTER.read_text() + "\nborn: 2024-13-45\n")
    err = one_line_error("topology", "--cluster", p, needle="a value cannot be read: month must be in 1..12")
    assert f"{p}:{len(CLUSTER.read_text().splitlines()) + 2}:" in err


def test_standard_input_is_read_when_named(tmp_path):
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "gpucluster"
    with open(CLUSTER, "rb") as f:
        proc = subprocess.run([str(exe), "topology", "--cluster", "/dev/stdin"], stdin=f, capture_output=True, timeout=120)
    assert proc.returncode == 0 and b"h100-64-ib" in proc.stdout
    proc = subprocess.run([str(exe), "topology", "--cluster", "/dev/stdin"], input=CLUSTER.read_bytes(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0 and b"h100-64-ib" in proc.stdout


@pytest.mark.parametrize("which", ["nodes", "pods"])
def test_empty_openb_csv_is_one_line(tmp_path, which):
    """Fuzz case 58: an empty node list raised `I/O operation on closed file` (the header was
    read again after the file was closed)."""
    (tmp_path / "n.csv").write_text("" if which == "nodes" else "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M32\n")
    (tmp_path / "t.csv").write_text("" if which == "pods" else "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n")
    (tmp_path / "s.yaml").write_text("name: s\nnodes_csv: n.csv\nhorizon_days: 0.01\nworkloads:\n"
                                     "  - {kind: trace, name: t, format: openb, path: t.csv}\n")
    one_line_error("simulate", tmp_path / "s.yaml", needle="the file is empty")


@pytest.mark.parametrize("target", ["/dev/null", "/dev/stdout", "/proc/self/mem", "fifo", "folder", "link-to-fifo"])
@pytest.mark.parametrize("argv", [["generate", "slurm", str(PLAN), "-o"], ["metrics", "{collective}", "-o"]])
def test_outputs_never_replace_devices_pipes_or_folders(tmp_path, monkeypatch, target, argv):
    """`-o /dev/null` as root renamed a regular file over the device (and `-o /dev/stdout` over the
    link): found while fuzzing. os.replace is guarded here, so that a regression fails this test
    instead of replacing the machine's /dev/null."""
    import os

    real_replace = os.replace

    def guarded(src, dst, *a, **k):
        assert str(tmp_path) in os.path.realpath(dst) and os.path.realpath(dst).startswith(str(tmp_path)), dst
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", guarded)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link-to-fifo").symlink_to(tmp_path / "fifo")
    collective = tmp_path / "r.json"
    collective.write_text(json.dumps(COLLECTIVE))
    path = target if target.startswith("/") else str(tmp_path / target)
    argv = [a.replace("{collective}", str(collective)) for a in argv]
    code, _, err = run(*argv, path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_output_through_a_link_replaces_the_file_it_names(tmp_path):
    real, link = tmp_path / "real.sh", tmp_path / "link.sh"
    real.write_text("old\n")
    link.symlink_to(real)
    code, _, _ = run("generate", "slurm", PLAN, "-o", link)
    assert code == 0 and link.is_symlink() and real.read_text().startswith("#!/bin/bash")


def test_metrics_of_a_collective_without_optional_fields_and_a_hostile_backend(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(COLLECTIVE))                  # rows without `wrong` (0 by the schema): KeyError before
    code, out, _ = run("metrics", p)
    assert code == 0 and "gpucluster_collective_wrong_values{" in out
    p.write_text(json.dumps({**COLLECTIVE, "backend": "nccl\x1b]0;T\x07"}))
    one_line_error("metrics", p, needle="backend: must be text without control characters")


def test_comm_on_one_gpu(tmp_path):
    """Fuzz case 50019 (the gavel-36-36-36 example, one GPU per node): predict() gave the algorithm
    of a 1-GPU group as one string, not one per size, and `comm` indexed into it (IndexError)."""
    code, out, _ = run("comm", "--gpu", "H100:1", "--gpus", "1", "-e", "1M")
    assert code == 0 and "algorithm none" in out


@pytest.mark.parametrize("value", ["9223372036854775808", "1000000000", "0"])
def test_reliability_interval_is_bounded(value):
    """Fuzz case 2342: `--interval 9223372036854775808` (minutes) overflowed e^(T/M) in the
    lost-work formula (OverflowError); refused at the boundary, and the formula takes its limit."""
    one_line_error("reliability", CLUSTER, "--interval", value, needle="--interval")


def test_lost_work_formula_takes_its_limit_for_huge_segments():
    from gpucluster.model.reliability import expected_loss_in_segment
    assert expected_loss_in_segment(1e30, 3600.0) == 3600.0
    assert expected_loss_in_segment(10.0, 3600.0) == pytest.approx(5.0, rel=1e-2)


@pytest.mark.parametrize("argv", [["generate", "slurm", str(PLAN), "-o"], ["metrics", "{collective}", "-o"]])
def test_output_name_too_long_is_one_line(tmp_path, argv):
    """Fuzz case 6556: `-o` with a 5,000-character name raised OSError (File name too long)."""
    collective = tmp_path / "r.json"
    collective.write_text(json.dumps(COLLECTIVE))
    one_line_error(*[a.replace("{collective}", str(collective)) for a in argv], str(tmp_path / ("a" * 5000)),
                   needle="cannot write")


@pytest.mark.parametrize("value", ["9223372036854775808", "101", "nan", "inf", "0"])
def test_cost_years_is_bounded(value):
    """Fuzz case 8506: `cost --years 9223372036854775808` printed a TCO for 10^19 years."""
    one_line_error("cost", CLUSTER, "--years", value, needle="--years")


@pytest.mark.parametrize("field", ["v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "head_dim", "ffn_hidden",
                                   "moe_ffn_hidden", "kv_heads", "experts_per_token", "dense_layers"])
def test_every_model_width_and_count_is_bounded(tmp_path, field):
    """Fuzz case 102: a DeepSeek-V3 file with `v_head_dim: 2**63` was accepted and sent the planner
    through every layout (~4 CPU-s) to say it fits nowhere: each width and count has a bound now."""
    from gpucluster.specs.workload import model_presets

    spec = model_presets().get("deepseek-v3").model.model_dump(mode="json", exclude_none=True)
    spec[field] = 2**63
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(spec))
    one_line_error("models", p, needle=f"{field}: Input should be less than or equal to")


def test_reliability_gpu_counts_are_bounded():
    """Fuzz case 10942: `--gpus 9223372036854775808` printed an MTBF of 0.0 s."""
    one_line_error("reliability", CLUSTER, "--gpus", "9223372036854775808", needle="--gpus: GPU counts must be from 1")
    code, out, _ = run("reliability", CLUSTER, "--gpus", "100000")
    assert code == 0 and "100,000" in out


@pytest.mark.parametrize("value", ["1e999T", "1e19"])
def test_token_counts_are_bounded(value):
    """Fuzz case 11348: `cost --tokens 1e999T` raised OverflowError (int of inf)."""
    one_line_error("cost", CLUSTER, "--model", "llama2-7b", "--tokens", value, needle="--tokens: at most")


def test_simulation_horizon_is_bounded(tmp_path):
    """Fuzz case 11744: `horizon_days: 1e308` simulated failures until the 60 s wall limit."""
    data = yaml.safe_load((EXAMPLES / "scenarios" / "failures-256-nodes.yaml").read_text())
    data["horizon_days"] = 1e308
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    one_line_error("simulate", p, needle="horizon_days: Input should be less than or equal to 3650")


def test_model_name_too_long_for_a_file_name():
    """Fuzz case 12566: `models aaaa...` (5,000 characters) raised OSError (File name too long)
    while checking whether the name was a file."""
    one_line_error("models", "a" * 5000, needle="unknown model preset")


def test_metrics_exports_the_checked_values(tmp_path):
    """Fuzz case 12822: a collective row with `"time_us": "8"` (accepted as 8.0 by the schema)
    reached the exporter as text (TypeError)."""
    doc = json.loads(json.dumps(COLLECTIVE))
    doc["rows"][0]["time_us"] = "8"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    code, out, _ = run("metrics", p)
    assert code == 0 and "gpucluster_collective_time_seconds{" in out and "} 8e-06" in out


def test_scenario_seed_must_be_non_negative(tmp_path):
    """Fuzz case 18237: `seed: -8` reached numpy (ValueError: expected non-negative integer)."""
    data = yaml.safe_load((EXAMPLES / "scenarios" / "failures-256-nodes.yaml").read_text())
    data["seed"], data["horizon_days"] = -8, 1
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    one_line_error("simulate", p, needle="seed: Input should be greater than or equal to 0")


def test_a_path_too_long_to_look_up_is_a_one_line_error(tmp_path):
    # fuzz case 33316: a scenario whose cluster is a 5,000-character name (ENAMETOOLONG from stat)
    data = yaml.safe_load((CLUSTER.parent / "scenarios" / "shared-vs-partitioned.yaml").read_text())
    data["cluster"] = "1" * 5000
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    one_line_error("simulate", str(scenario), needle="cluster spec not found")


def test_a_simulation_job_count_that_is_a_mapping_is_refused(tmp_path):
    # fuzz case 47300: `jobs.completed: {"a": 1}` was taken for a breakdown and silently dropped
    doc = {"schema": "gpucluster-simulation/v1", "scenario": "s", "policy": "fifo",
           "jobs": {"total": 3, "completed": {"a": 1}, "failed": 1, "not_run": {}}}
    result = tmp_path / "r.json"
    result.write_text(json.dumps(doc))
    one_line_error("metrics", str(result), needle="jobs.completed")


def test_arrivals_are_bounded_before_the_simulator_allocates(tmp_path):
    # fuzz case 49194: arrivals.count 2^31 made numpy ask for 16 GiB
    data = yaml.safe_load((CLUSTER.parent / "scenarios" / "failures-256-nodes.yaml").read_text())
    data["workloads"][0]["arrivals"]["count"] = 2**31
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    one_line_error("simulate", str(scenario), needle="arrivals.count")


def test_a_storage_path_with_a_control_character_is_refused_by_metrics(tmp_path):
    # fuzz case 48734: an ESC sequence in `path` became a label value printed to the terminal
    doc = {"schema": "gpucluster-bench-storage/v1", "path": "\x1b]0;TITLE\x07", "size_bytes": 1 << 30, "write_gbps": 1.8,
           "read_gbps": 3.2}
    result = tmp_path / "r.json"
    result.write_text(json.dumps(doc))
    one_line_error("metrics", str(result), "--openmetrics", needle="path")
