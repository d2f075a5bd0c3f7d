"""The first hour: `check`, `topology`, `cost`, `facility` and `reliability` take the same
`--gpu/--nodes/--nic/--nics-per-node` options as `plan train`; `gpucluster init` writes the
cluster YAML from them and every command loads it to the same result; option ranges are one
line with exit 2."""

from __future__ import annotations

import json

import pytest
from tests_cli_helpers import assert_one_line_error, run

from gpucluster.cli.cluster_options import spec_from_options
from gpucluster.specs.cluster import load_cluster

FLAGS = ["--gpu", "H100:8", "--nodes", "8", "--nic", "NDR400"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("init") / "cluster.yaml"
    proc = run("init", *FLAGS, "-o", str(path), check_rc=0)
    assert "Wrote" in proc.stdout
    return path


def test_init_writes_the_cluster_the_options_describe(written) -> None:
    spec = load_cluster(written)
    assert spec == spec_from_options("H100:8", 8, "NDR400")
    pool = spec.node_pools[0]
    assert (pool.count, pool.gpus_per_node, pool.nic, pool.nics_per_node) == (8, 8, "NDR400", 8)
    assert spec.total_gpus == 64
    assert "seed 1's AI-Training-NG8 node" in written.read_text()     # the assumed parts say so


def test_init_refuses_to_overwrite_without_force(written) -> None:
    assert_one_line_error(run("init", *FLAGS, "-o", str(written)), "exists", "--force")
    run("init", "--gpu", "A100:8", "-o", str(written) + ".2", check_rc=0)
    run("init", *FLAGS, "-o", str(written) + ".2", "--force", check_rc=0)
    assert load_cluster(str(written) + ".2") == load_cluster(written)


@pytest.mark.parametrize("command, how", [
    ("topology", "option"), ("cost", "argument"), ("facility", "argument"), ("check", "argument"),
    ("reliability", "argument")])
def test_options_and_the_written_file_give_the_same_answer(written, command, how) -> None:
    by_file = run(command, *(["--cluster", str(written)] if how == "option" else [str(written)]), "--json")
    by_flags = run(command, *FLAGS, "--json")
    assert by_file.returncode == by_flags.returncode and by_file.returncode in (0, 1), by_flags.stderr
    a, b = json.loads(by_file.stdout), json.loads(by_flags.stdout)
    for f in b.get("findings", []):   # check: a finding points at the file, or at the options
        assert not f["where"] or f["where"].startswith("options --gpu H100-SXM5-80GB:8 --nodes 8"), f["where"]
        f["where"] = None
    for f in a.get("findings", []):
        f["where"] = None
    assert a == b
    if command == "reliability":
        assert a["job"]["gpus"] == 64


def test_a_file_and_the_options_together_are_refused(written) -> None:
    assert_one_line_error(run("cost", str(written), "--gpu", "H100:8"), "--gpu", "not both")
    assert_one_line_error(run("topology", "--nic", "NDR400", "--nodes", "2"), "--gpu")


def test_a_bad_option_names_itself() -> None:
    assert_one_line_error(run("topology", "--gpu", "H100:8", "--nodes", "0"), "--nodes", "from 1")
    assert_one_line_error(run("facility", "--gpu", "H100:8", "--nic", "nope"), "--nic")
    assert_one_line_error(run("init", "--gpu", "nope:8"), "--gpu")


@pytest.mark.parametrize("args, field", [
    (["facility", "--input-gbps-per-gpu", "-1"], "--input-gbps-per-gpu"),
    (["facility", "--input-gbps-per-gpu", "nan"], "--input-gbps-per-gpu"),
    (["check", "--input-gbps-per-gpu", "inf"], "--input-gbps-per-gpu"),
    (["check", "--input-gbps-per-gpu", "nan"], "--input-gbps-per-gpu"),
    (["cost", "--serve-tokens-per-s", "nan"], "--serve-tokens-per-s"),
    (["cost", "--serve-tokens-per-s", "inf"], "--serve-tokens-per-s"),
    (["cost", "--serve-tokens-per-s", "100", "--serve-gpus", "0"], "--serve-gpus"),
])
def test_option_ranges_are_refused_with_the_range(written, args, field) -> None:
    proc = run(args[0], str(written), *args[1:])
    assert_one_line_error(proc, field)
    assert ">=" in proc.stderr or "> 0" in proc.stderr or "from 1" in proc.stderr


def test_advise_months_nan_is_refused_with_its_range() -> None:
    assert_one_line_error(run("advise", "--model", "llama3-8b", "--months", "nan"), "--months", "> 0")
