"""Regression tests for what the `anyopt`, `init` and `local` fuzz kinds and the hunt of issue 23
found (each failed before its fix), and for the bounded layout-search factoring. In process."""

from __future__ import annotations

import math
import os
import stat
import time
from pathlib import Path

import pytest

import gpucluster
from fuzz_cases import EXAMPLES, PLAN_FILE
from fuzz_oracle import classify, run_in_process

CLUSTER = EXAMPLES / "h100-64-ib.yaml"


def one_line_error(*argv: str | Path, needle: str = "", cwd: Path | None = None) -> str:
    code, out, err = run_in_process([str(a) for a in argv], cwd=cwd)
    assert classify(code, out, err) == [], (code, out[-2000:], err[-2000:])
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), (code, err)
    assert needle in err, err
    return err


# --- the layout search factors a bounded count (issue 23 item 3) ---------------------------------

def test_divisors_match_trial_division_up_to_the_bound():
    from gpucluster.plan.train_search import MAX_FACTORED, _divisors

    for n in [*range(1, 2000), 720_720, 999_999_937, 1_024_000_000, MAX_FACTORED]:
        small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
        assert _divisors(n) == sorted({*small, *(n // d for d in small)}), n
    assert _divisors(0) == [] and _divisors(-8) == []     # a fixed tp larger than the GPUs leaves 0


@pytest.mark.parametrize("n", [2**30 + 1, 10**15, 2**63, 2**63 - 25, 10**400])
def test_a_count_past_the_bound_is_refused_before_any_division(n):
    from gpucluster.plan.train_search import _divisors

    t0 = time.process_time()
    with pytest.raises(gpucluster.UserError, match="factors 1 to 1,073,741,824"):
        _divisors(n)
    assert time.process_time() - t0 < 0.1         # 2**63 - 25 (a prime) by trial division: hours


def test_the_search_refuses_a_huge_gpu_count_quickly():
    from gpucluster.plan.train_search import search
    from gpucluster.specs.workload import load_model_spec

    spec = load_model_spec("llama2-7b")
    plan = gpucluster.plan_train("llama2-7b", gpu="H100:8", nodes=2, tokens="1B", top=1)
    fabric = plan.target.fabric
    t0 = time.process_time()
    with pytest.raises(gpucluster.UserError):
        search(spec, fabric, 2**63 - 25, 1024, top=1)
    assert time.process_time() - t0 < 1.0


@pytest.mark.parametrize("nodes", [1_000_001, 10**15, 2**63, 2**64 + 1])
def test_huge_node_counts_are_one_line_and_a_user_error(nodes):
    t0 = time.process_time()
    one_line_error("plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--tokens", "1B", "--nodes", str(nodes),
                   needle="--nodes")
    with pytest.raises(gpucluster.UserError, match="--nodes"):
        gpucluster.plan_train("llama2-7b", gpu="H100:8", nodes=nodes, tokens="1B")
    with pytest.raises(gpucluster.UserError, match="--nodes"):
        gpucluster.plan_serve("llama2-7b", 5, gpu="H100:8", nodes=nodes)
    assert time.process_time() - t0 < 5.0


@pytest.mark.parametrize("layout", [{"tp": 2**63}, "tp=9223372036854775808", {"dp": 2**63}, {"pp": 10**12}])
def test_huge_fixed_layout_values_are_a_user_error(layout):
    with pytest.raises(gpucluster.UserError, match="--layout"):
        gpucluster.plan_train("llama2-7b", gpu="H100:8", nodes=1, tokens="1B", layout=layout)


# --- options the fuzzer did not reach before ----------------------------------------------------

@pytest.mark.parametrize("count", ["\u00b2", "\u0663", "1" * 5000, "1025", "0"])
def test_gpu_count_is_ascii_digits_from_1_to_1024(count):
    # '²' passed str.isdigit() and int() raised ValueError; 5,000 digits raised past int()'s limit;
    # '1025' was refused naming --nics-per-node
    one_line_error("init", "--gpu", f"H100:{count}", needle="--gpu: GPU count must be an integer from 1 to 1,024")
    with pytest.raises(gpucluster.UserError, match="--gpu"):
        gpucluster.plan_train("llama2-7b", gpu=f"H100:{count}", tokens="1B")


@pytest.mark.parametrize("argv", [["slurm", "status", "1" * 5000, "--timeout", "1"],
                                  ["init", "--gpu", "H100:8", "--nodes", "-" + "1" * 5000],
                                  ["bench", "collective", "--local", "1" * 5000]])
def test_an_integer_option_of_5000_digits_is_one_line(argv):
    one_line_error(*argv, needle="at most 100 digits")


@pytest.mark.parametrize("value", ["inf", "1e308", "1" * 400, "nan", "-1", "0"])
def test_checkpoint_write_gbps_is_finite_and_bounded(value):
    # inf and 1e308 (a write time of 0 s) raised ValueError in the reliability model
    one_line_error("generate", "torchrun", PLAN_FILE, "--checkpoint-write-gbps", value,
                   needle="--checkpoint-write-gbps")


def test_generate_to_a_dangling_link_is_the_only_line(tmp_path):
    # the warnings were printed before the write failed: two lines on exit 2
    os.symlink(tmp_path / "gone" / "x", tmp_path / "dangling")
    one_line_error("generate", "slurm", PLAN_FILE, "-o", tmp_path / "dangling", needle="--out")


@pytest.mark.parametrize("target", ["fifo", "loop", "folder"])
def test_init_force_never_renames_over_a_pipe_a_loop_or_a_folder(tmp_path, target):
    # `init -o fifo --force` replaced the FIFO (as root, `-o /dev/null --force` would have
    # replaced /dev/null); it now goes through the one writer (output_file.py)
    path = tmp_path / target
    if target == "fifo":
        os.mkfifo(path)
    elif target == "loop":
        os.symlink(path, path)
    else:
        path.mkdir()
    one_line_error("init", "--gpu", "H100:8", "-o", path, "--force", needle="--output")
    mode = os.lstat(path).st_mode
    assert {"fifo": stat.S_ISFIFO, "loop": stat.S_ISLNK, "folder": stat.S_ISDIR}[target](mode)


@pytest.mark.parametrize("gpu", ["H100:8\n", " H100:8\u2028", "H100:8\x85"])
def test_init_header_repeats_the_options_as_read(tmp_path, gpu):
    # the raw --gpu text went into the header: a newline broke the comment into a YAML error
    # (after the file was written), U+2028 and NEL reached the config
    out = tmp_path / "c.yaml"
    code, _, err = run_in_process(["init", "--gpu", gpu, "-o", str(out)])
    assert code == 0, err
    text = out.read_text()
    assert text.startswith("# Written by `gpucluster init --gpu H100-SXM5-80GB:8 --nic NDR400`.\n")
    assert not any(c in text for c in "\u2028\x85")
    assert gpucluster.load_cluster(str(out)).node_pools[0].gpus_per_node == 8


@pytest.mark.parametrize("name", ["a\u202eb", "\u2066x\u2069", "a\u2028b", "x\x85y", "z\u200bw", "", " ", "a" * 201])
def test_init_name_is_printable_text(name):
    one_line_error("init", "--gpu", "H100:8", "--name", name, needle="--name")


@pytest.mark.parametrize("target", ["loop", "missing", "file"])
def test_slurm_bench_out_dir_is_a_folder(tmp_path, target):
    # a loop of links raised RuntimeError from Path.resolve(); a missing folder was queued
    path = tmp_path / target
    if target == "loop":
        os.symlink(path, path)
    elif target == "file":
        path.write_text("x")
    one_line_error("slurm", "bench", "--wait", "1", "--poll", "0.2", "--timeout", "1", "--out-dir", path,
                   needle="--out-dir")


@pytest.mark.parametrize("value", ["a\u2028b", "a\u202eb", "x\x85y", "a\nb"])
def test_k8s_socket_ifname_is_checked_text(value):
    # written into the manifest's env unchecked (slurm's --socket-ifname was checked)
    one_line_error("generate", "k8s", PLAN_FILE, "--socket-ifname", value, needle="--socket-ifname")


@pytest.mark.parametrize("argv", [["comm", "--cluster", str(CLUSTER), "--max", "1" * 5000],
                                  ["comm", "--cluster", str(CLUSTER), "--min", "9" * 400 + "T"],
                                  ["bench", "collective", "--max", "1" * 400]])
def test_a_size_of_hundreds_of_digits_is_one_line(argv):
    # float() read it as inf and int(inf) raised OverflowError in units.parse_bytes
    one_line_error(*argv, needle="at most 2**62 bytes")


@pytest.mark.parametrize("argv,needle", [(["bench", "hbm", "--size", "abc"], "--size"),
                                         (["bench", "hbm", "--size", "0"], "--size"),
                                         (["bench", "hbm", "--iters", "0"], "--iters"),
                                         (["bench", "gemm", "--sizes", "-5"], "--sizes"),
                                         (["bench", "gemm", "--sizes", "8,1000000000"], "--sizes"),
                                         (["bench", "gemm", "--iters", "-1"], "--iters"),
                                         (["bench", "gemm", "--gpu", "nope"], "--gpu")])
def test_gemm_and_hbm_options_are_checked_on_every_machine(argv, needle):
    # `bench hbm --size abc` was a ValueError traceback; the other values reached torch on a GPU
    # (checked only after "no GPU: skipped" elsewhere)
    one_line_error(*argv, needle=needle)


@pytest.mark.parametrize("step_s", [1e308, 365 * 86400 + 1, 1e30])
def test_a_plan_step_time_past_a_year_is_refused(tmp_path, step_s):
    # 1e308 s passed the plan schema (finite) and generate slurm's job chain raised OverflowError
    import json

    plan = json.loads(Path(PLAN_FILE).read_text())
    plan["best"]["step_s"] = step_s
    path = tmp_path / "p.json"
    path.write_text(json.dumps(plan))
    one_line_error("generate", "slurm", path, needle="step_s")


@pytest.mark.parametrize("ratio", [1e308, 1025, float("inf")])
def test_fabric_oversubscription_is_bounded(tmp_path, ratio):
    # 1e308 passed `ge=1` and fat_tree.leaf_ports raised OverflowError (the one traceback of the
    # 20,000-case run on f1b40ce, case 120,056)
    import yaml

    data = yaml.safe_load(CLUSTER.read_text())
    data["fabric"]["oversubscription"] = ratio
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    one_line_error("reliability", path, "--gpus", "8", needle="oversubscription")
