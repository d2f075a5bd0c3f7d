"""The programs we call are untrusted input (issue 23 item 2): stub sacct/squeue/scontrol/sbatch
on PATH print invalid UTF-8, blank or huge fields, endless output; the job's output is /dev/zero
or a foreign JSON. Every run is exit 0, 1 or 2 with one line on 2, never a traceback, and reads
no more than its caps. Also issue 22: `slurm status` expands slurm-%j.out, `submit` follows --chdir."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from fuzz_oracle import classify, run_in_process
from slurm_stubs import install

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "h200-256-ndr400.yaml")
HISTORY = ("JobID|JobName|User|Account|Partition|QOS|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ExitCode|"
           "AllocTRES|ReqTRES|NNodes\n"
           "1|n\xe9|ana|a|gpu|normal|2024-05-01T10:00:00|2024-05-01T10:00:00|2024-05-01T10:05:00|"
           "2024-05-01T11:05:00|01:00:00|02:00:00|COMPLETED|0:0|gres/gpu=8|gres/gpu=8|1\n").encode("latin-1")


def _run(monkeypatch, tmp_path, outputs, *argv, codes=None, stderr=None):
    env = install(tmp_path / "bin", outputs, codes=codes, stderr=stderr)
    monkeypatch.setenv("PATH", env["PATH"])
    code, out, err = run_in_process(list(argv), timeout_s=60, cwd=tmp_path)
    assert not classify(code, out, err), (code, out, err)
    return code, out, err


def _squeue(**job) -> bytes:
    return json.dumps({"jobs": [{"job_id": 5, **job}]}).encode()


@pytest.mark.parametrize("outputs", [
    {"squeue": b'{"jobs": [{"job_id": 5, "job_state": "\xff\xfe", "name": "\xc3("}]}'},
    {"squeue": _squeue(job_state=" ")},                      # blank state: was an IndexError
    {"squeue": _squeue(job_state=["  "], exit_code=1e300)},
    {"squeue": _squeue(job_state="RUNNING", name="x" * 100_000, nodes=["a"])},
    {"squeue": b'{"jobs": [{"job_id": 1e999}]}', "sacct": b"5|n\xff|\xff|0:0|n|r\n"},
    {"squeue": b"[" * 100_000, "scontrol": b"JobId=5 JobName=\xff\xff UserId=x JobState= ExitCode=9" + b"9" * 5000},
    {"sacct": b"5|n|COMPLETED|" + b"1" * 5000 + b":0|n|r\n"},
    {"scontrol": b"JobId=5 JobName=a UserId=x JobState=COMPLETED ExitCode=0:0 StdOut=/x/o-%j.out"},
])
def test_status_reads_any_bytes(monkeypatch, tmp_path, outputs):
    code, out, _err = _run(monkeypatch, tmp_path, outputs, "slurm", "status", "5", "--json")
    assert code in (0, 2)
    if code == 0:
        doc = json.loads(out)
        assert doc["state"].isupper() or doc["state"] == "UNKNOWN"
        assert len(doc["name"]) <= 1000


def test_endless_output_is_capped(monkeypatch, tmp_path):
    start = time.monotonic()
    code, _out, err = _run(monkeypatch, tmp_path, {"squeue": "!yes"}, "slurm", "status", "5")
    assert code == 2 and "more than 16 MiB" in err
    assert time.monotonic() - start < 30


def test_a_program_that_never_answers_is_one_line(monkeypatch, tmp_path):
    code, _out, err = _run(monkeypatch, tmp_path, {"squeue": "!sleep"}, "slurm", "status", "5", "--timeout", "0.5")
    assert code == 2 or "Slurm knows no job" in err


def test_a_failing_program_is_quoted_short(monkeypatch, tmp_path):
    code, _out, err = _run(monkeypatch, tmp_path, {}, "slurm", "import", "-o", "t.txt", codes={"sacct": 1},
                          stderr={"sacct": b"\xff" * 100_000})
    assert code == 2 and len(err) < 400
    assert not (tmp_path / "t.txt").exists()


@pytest.mark.parametrize("option", [["--wait", "nan"], ["--wait", "inf"], ["--poll", "0"], ["--poll", "-1"],
                                    ["--poll", "nan"], ["--timeout", "inf"], ["--timeout", "1e9"],
                                    ["--wait", "1e12"]])
def test_time_options_are_finite_and_positive(monkeypatch, tmp_path, option):
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    code, _out, err = _run(monkeypatch, tmp_path, {"sbatch": "5"}, "slurm", "submit", "job.sbatch", *option)
    assert code == 2 and option[0] in err


@pytest.mark.parametrize("option", [["--iters", "0"], ["--iters", "-1"], ["--nodes", "1000000000"],
                                    ["--step-factor", "1"], ["--op", "nope"]])
def test_slurm_bench_refuses_before_queueing(monkeypatch, tmp_path, option):
    code, _out, _err = _run(monkeypatch, tmp_path, {"sbatch": "5"}, "slurm", "bench", *option)
    assert code == 2


def test_job_output_without_bench_keys_is_not_a_key_error(monkeypatch, tmp_path):
    out_file = tmp_path / "o.out"
    out_file.write_text('{"schema": "gpucluster-bench-collective/v1", "rows": [{"size_bytes": 8}]}\n')
    done = _squeue(job_state="COMPLETED", exit_code=0, standard_output=str(out_file))
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    code, out, _err = _run(monkeypatch, tmp_path, {"sbatch": "5", "squeue": done}, "slurm", "submit", "job.sbatch",
                          "--poll", "0.01", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["bench"] is None and ("op" in doc["bench_error"] or "rows" in doc["bench_error"])


def test_job_output_that_is_dev_zero_is_not_read(monkeypatch, tmp_path):
    done = _squeue(job_state="COMPLETED", exit_code=0, standard_output="/dev/zero")
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    code, out, _err = _run(monkeypatch, tmp_path, {"sbatch": "5", "squeue": done}, "slurm", "submit", "job.sbatch",
                          "--poll", "0.01", "--json")
    assert code == 0 and json.loads(out)["stdout_tail"] is None


def test_read_tail_is_bounded(tmp_path):
    from gpucluster.engines.slurm import read_output, read_tail

    assert read_tail("/dev/zero") is None and read_output("/dev/zero", 10) is None
    os.mkfifo(tmp_path / "fifo")
    assert read_tail(str(tmp_path / "fifo")) is None      # never waits for a writer
    (tmp_path / "big").write_bytes(b"a" * 100_000 + b"\xff end")
    tail = read_tail(str(tmp_path / "big"), 10)
    assert tail is not None and len(tail) <= 10 and tail.endswith("end")


def test_status_expands_the_output_pattern(monkeypatch, tmp_path):
    """issue 22: squeue gives --output as written; status names the file."""
    running = _squeue(job_state="RUNNING", standard_output="/scratch/slurm-%j.out", name="t")
    code, out, _err = _run(monkeypatch, tmp_path, {"squeue": running}, "slurm", "status", "5", "--json")
    assert code == 0 and json.loads(out)["stdout"] == "/scratch/slurm-5.out"


def test_submit_follows_the_scripts_chdir(tmp_path):
    """issue 22: Slurm writes the default output (and a relative --output) in --chdir."""
    from gpucluster.cli.slurm_cmd import output_args

    args, path = output_args("#!/bin/bash\n#SBATCH --chdir=/scratch/run\necho\n", [], tmp_path)
    assert path == "/scratch/run/slurm-%j.out" and args[0] == "--output=/scratch/run/slurm-%j.out"
    args, path = output_args("#!/bin/bash\n#SBATCH -D sub\n#SBATCH -o o-%j.txt\n", [], tmp_path)
    assert args == [] and path == str(tmp_path / "sub" / "o-%j.txt")


def test_import_writes_sacct_text_atomically_after_checking(monkeypatch, tmp_path):
    (tmp_path / "t.txt").write_text("old")
    code, _out, _err = _run(monkeypatch, tmp_path, {"sacct": b"\xff\xfe not sacct\n"}, "slurm", "import", "-o", "t.txt")
    assert code == 2 and (tmp_path / "t.txt").read_text() == "old"
    code, out, _err = _run(monkeypatch, tmp_path, {"sacct": HISTORY}, "slurm", "import", "-o", "t.txt", "--json")
    assert code == 0 and json.loads(out)["rows"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".t.txt")]


@pytest.mark.parametrize("extra", [["--cluster", "missing.yaml"], ["--cluster", CLUSTER, "--policy", "nope"]])
def test_import_refuses_a_scenario_that_cannot_replay(monkeypatch, tmp_path, extra):
    code, _out, _err = _run(monkeypatch, tmp_path, {"sacct": HISTORY}, "slurm", "import", "-o", "t.txt",
                          "--scenario", "s.yaml", "--partitions", "none", *extra)
    assert code == 2 and not (tmp_path / "s.yaml").exists() and not (tmp_path / "t.txt").exists()


@pytest.mark.parametrize("partitions", ["/dev/zero", "/dev/urandom", "fifo", "."])
def test_partitions_file_goes_through_the_bounded_reader(monkeypatch, tmp_path, partitions):
    os.mkfifo(tmp_path / "fifo")
    start = time.monotonic()
    code, _out, _err = _run(monkeypatch, tmp_path, {"sacct": HISTORY}, "slurm", "import", "-o", "t.txt",
                          "--scenario", "s.yaml", "--cluster", CLUSTER, "--partitions", partitions)
    assert code == 2 and time.monotonic() - start < 10
