"""`gpucluster check` through the real console script: exit codes, JSON, bad input."""

import json

from tests_cli_helpers import ROOT, assert_one_line_error, run

SPEC = "examples/ng8-32node.yaml"


def test_seed_job_on_its_cluster_json():
    proc = run("check", SPEC, "--job", "examples/jobs/seed-train-70b.sbatch", "--json")
    data = json.loads(proc.stdout)
    assert data["schema"] == "gpucluster-check/v1" and data["job_nodes"] == 32
    rules = {f["rule"] for f in data["findings"]}
    assert "nccl-debug" in rules and "sbatch-gres" not in rules
    assert proc.returncode == data["exit_code"]
    for f in data["findings"]:
        assert f["severity"] in ("info", "warning", "error") and f["fix"] and f["title"]


def test_exit_codes_follow_fail_on():
    clean = run("check", "examples/seed-figures/min-8xh200.yaml", "--job", "examples/jobs/good-nccl.env",
                "--rule", "nccl-debug", "--rule", "nccl-ib-disabled")
    assert clean.returncode == 0 and "clean -> exit 0" in clean.stdout
    warn = ["check", SPEC, "--job", "examples/jobs/seed-train-70b.sbatch", "--rule", "nccl-debug"]
    assert run(*warn).returncode == 0
    assert run(*warn, "--fail-on", "warning").returncode == 1
    assert run("check", SPEC, "--job", "examples/jobs/bad-train.sbatch", "--rule", "sbatch-gres").returncode == 1


def test_human_output_has_evidence_and_fix():
    out = run("check", "examples/h200-256-100gbe.yaml", "--job", "examples/jobs/seed-train-70b.sbatch",
              check_rc=1).stdout
    assert "ERROR" in out and "ethernet-training" in out and "evidence:" in out and "fix:" in out
    assert "seed-train-70b.sbatch:12" in out


def test_unparseable_job_is_a_finding_not_a_crash():
    proc = run("check", SPEC, "--job", "examples/jobs/broken-ds.json", "--rule", "job-parse", check_rc=1)
    assert "broken-ds.json:5" in proc.stdout and "Traceback" not in proc.stderr


def test_bad_input_one_line_exit_2(tmp_path):
    assert_one_line_error(run("check", "nope.yaml"), "nope.yaml", "file not found")
    assert_one_line_error(run("check", SPEC, "--job", "missing.sbatch"), "missing.sbatch")
    assert_one_line_error(run("check", SPEC, "--fail-on", "fatal"), "--fail-on")
    assert_one_line_error(run("check", SPEC, "--rule", "nccl-debugg"), "nccl-debug")
    assert_one_line_error(run("check", SPEC, "--model", "gpt-9"), "gpt-9")
    assert_one_line_error(run("check", SPEC, "--checkpoint-interval", "often"), "--checkpoint-interval")
    bad = tmp_path / "c.yaml"
    bad.write_text((ROOT / SPEC).read_text().replace("voltage_v: 480", "voltage_v: -1"))
    assert_one_line_error(run("check", str(bad)), "facility.voltage_v", f"{bad}:")


def test_list_rules():
    out = run("check", "--list-rules", check_rc=0).stdout
    for rid in ("scale-out-bandwidth", "rack-power", "power-feed", "checkpoint-tier", "deepspeed-batch",
                "nccl-socket-ifname", "sbatch-exclusive"):
        assert rid in out


def test_header_says_an_impossible_nodes_is_not_the_job_count(tmp_path):
    """issue 23 item 7: the header showed the pool's 32 nodes as the job's for `--nodes=4-2`."""
    job = tmp_path / "j.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=4-2\n#SBATCH --gres=gpu:8\nsrun python t.py\n")
    proc = run("check", SPEC, "--job", str(job), "--rule", "sbatch-exclusive", check_rc=1)
    assert "--nodes=4-2 is invalid (minimum 4 above maximum 2)" in " ".join(proc.stdout.split())   # rich wraps
    data = json.loads(run("check", SPEC, "--job", str(job), "--rule", "sbatch-exclusive", "--json", check_rc=1).stdout)
    assert "--nodes=4-2 is invalid" in data["job_nodes_note"]
    [f] = data["findings"]
    assert f["severity"] == "error" and "--nodes=4-2" in f["title"]
