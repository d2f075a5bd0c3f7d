"""The terminal experience: --quiet, NO_COLOR, one-line usage errors, versioned --json."""

import json
import re

import pytest
from test_report_cli import run

COLOR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|38;[0-9;]+|9[0-7])m")
CHECK = ["check", "examples/h200-256-100gbe.yaml"]


def test_no_color_is_respected_even_when_color_is_forced():
    forced = run(*CHECK, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert COLOR.search(forced.stdout), "FORCE_COLOR should give colors, else this test proves nothing"
    plain = run(*CHECK, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.returncode == forced.returncode == 1
    assert not COLOR.search(plain.stdout + plain.stderr)


@pytest.mark.parametrize("flag", ["--quiet", "-q"])
def test_quiet_prints_nothing_but_keeps_exit_code_and_files(tmp_path, flag):
    out = tmp_path / "check.html"
    proc = run(*CHECK, flag, "--html", str(out))
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr == ""
    assert out.is_file()
    data = json.loads(run(flag, "plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--json").stdout)
    assert data["schema"] == "gpucluster-plan-train/v1"


@pytest.mark.parametrize("args, needle", [
    (["plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--htm", "x"], "No such option: --htm"),
    (["plan", "train", "--gpu", "H100:8"], "Missing option '--model'"),
    (["nosuch"], "No such command 'nosuch'"),
    (["plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--nodes", "two"], "--nodes"),
])
def test_usage_errors_are_one_line_with_a_hint(args, needle):
    proc = run(*args)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and needle in err and "--help" in err and "Traceback" not in err


@pytest.mark.parametrize("args, schema", [
    (["plan", "train", "--gpu", "H100:8", "--model", "llama2-7b"], "gpucluster-plan-train/v1"),
    (["plan", "serve", "--model", "llama3-8b", "--rate", "10", "--gpu", "H100:8"], "gpucluster-plan-serve/v1"),
    (["comm", "--gpu", "H100:8"], "gpucluster-comm/v1"),
    (["topology", "--cluster", "examples/h200-256-ndr400.yaml"], "gpucluster-topology/v1"),
    (["cost", "examples/h200-256-ndr400.yaml"], "gpucluster-cost/v1"),
    (["facility", "examples/h200-256-ndr400.yaml"], "gpucluster-facility/v1"),
    (["reliability", "examples/h200-256-ndr400.yaml"], "gpucluster-reliability/v1"),
    (["check", "examples/h200-256-ndr400.yaml"], "gpucluster-check/v1"),
])
def test_json_output_names_its_schema_version(args, schema):
    proc = run(*args, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["schema"] == schema
