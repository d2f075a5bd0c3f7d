"""One test per finding of issue 15 (and 14's duplicate keys) that this slice fixed: hostile names
printed literally, readers bounded, job files that crashed the parsers. In process (fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fuzz_cases import EXAMPLES, classify, run_in_process

CLUSTER = EXAMPLES / "h100-64-ib.yaml"
NAME = "lab [/x] cluster [estimate] \x1b]0;TITLE\x07 \u202e end\\"
NAME_SHOWN = "lab [/x] cluster [estimate] \\x1b]0;TITLE\\x07 \\u202e end\\"
POOL = "pool[a]"
TIER = "[link=file:///etc/passwd]x[/link]"


def run(*argv: str) -> tuple[int | str, str, str]:
    code, out, err = run_in_process([str(a) for a in argv])
    assert classify(code, out, err) == [], (code, out[-2000:], err[-2000:])
    return code, out, err


def one_line_error(*argv: str, needle: str = "") -> str:
    code, out, err = run(*argv)
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
                    + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")))
    one_line_error("topology", "--cluster", bomb, needle="aliases are expanded")
    dup = tmp_path / "dup.yaml"
    dup.write_text(CLUSTER.read_text().replace("    count: 8 ", "    count: 8\n    count: 64 ", 1))
    err = one_line_error("cost", dup, needle="duplicate key")
    assert err.strip() == f"error: {dup}:12: node_pools[0].count: duplicate key (first at line 11)"
    one_line_error("facility", "/dev/zero", needle="larger than 4 MiB")
    one_line_error("check", CLUSTER, "--job", "/dev/zero", needle="larger than 1 MiB")


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
