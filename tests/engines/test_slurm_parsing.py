"""What the Slurm client and the sacct reader make of what Slurm 22.05 prints (the figures below
were read from a real 22.05; tests/integration/test_slurm.py runs them end to end)."""

from pathlib import Path


from gpucluster.cli.slurm_cmd import output_args
from gpucluster.engines.slurm import JobStatus, _exit_of, decode_wait_status, parse_exit_pair
from gpucluster.sim.traces.sacct import read_sacct


def test_raw_wait_status_from_squeue_json():
    assert decode_wait_status(768) == (3, None)          # `exit 3`: 3 << 8, what squeue --json v0.0.38 gives
    assert decode_wait_status(0) == (0, None)
    assert decode_wait_status(9) == (None, 9)            # killed by SIGKILL
    assert decode_wait_status(0x8F) == (None, 15)        # SIGTERM with the core-dump bit
    assert decode_wait_status(4294967294) == (None, None)  # NO_VAL
    assert _exit_of(768) == (3, None) and _exit_of(True) == (None, None)


def test_exit_pairs_and_later_json_forms():
    assert parse_exit_pair("3:0") == (3, None) and parse_exit_pair("0:9") == (None, 9)
    assert parse_exit_pair("") == (None, None) and parse_exit_pair("x") == (None, None)
    assert _exit_of({"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 9}}) == (None, 9)
    assert _exit_of({"status": "FAILED", "return_code": {"set": True, "number": 3}}) == (3, None)


def test_status_text():
    st = JobStatus(7, "FAILED", exit_code=3)
    assert st.exit_text() == "exit code 3" and st.slurm_exit == "3:0" and st.failed
    st = JobStatus(7, "FAILED", signal=9)
    assert st.exit_text() == "killed by signal 9 (SIGKILL)" and st.slurm_exit == "0:9"
    assert st.to_json()["exit_code"] is None and st.to_json()["signal"] == 9


def test_output_path_is_always_explicit(tmp_path):
    args, path = output_args("#!/bin/bash\necho hi\n", [], tmp_path)
    assert path == str(tmp_path / "slurm-%j.out")
    assert args == [f"--output={path}", f"--error={path}"]
    # the script's own --output is kept (and followed), stderr stays with it as Slurm does
    args, path = output_args('#!/bin/bash\n#SBATCH -J x\n#SBATCH --output="logs/a b-%j.txt"\necho\n', [], tmp_path)
    assert args == [] and path == str(tmp_path / "logs/a b-%j.txt")
    args, path = output_args("#!/bin/bash\n#SBATCH -o /abs/o.txt\n", [], tmp_path)
    assert args == [] and path == "/abs/o.txt"
    args, path = output_args("#!/bin/bash\n#SBATCH --error=e.txt\n", [], tmp_path)
    assert args == [f"--output={tmp_path}/slurm-%j.out"]
    args, path = output_args("#!/bin/bash\n", ["--output=/x/%j.log"], tmp_path)
    assert args == [] and path == "/x/%j.log"
    # a directive after the first command is not read by sbatch, nor here
    args, path = output_args("#!/bin/bash\necho\n#SBATCH --output=late.txt\n", [], tmp_path)
    assert path == str(tmp_path / "slurm-%j.out")


HEADER = "JobID|JobName|Partition|Submit|Start|End|State|ExitCode|AllocTRES|QOS|Timelimit"


def _trace(tmp_path: Path, *rows: str) -> str:
    p = tmp_path / "sacct.txt"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return str(p)


def test_sacct_keeps_how_each_job_ended(tmp_path):
    t = "2024-05-01T10:00:00"
    path = _trace(tmp_path,
                  f"1|ok|gpu|{t}|2024-05-01T10:01:00|2024-05-01T11:01:00|COMPLETED|0:0|gres/gpu:h100=8|normal|02:00:00",
                  f"2|boom|gpu|{t}|2024-05-01T10:00:30|2024-05-01T10:10:30|FAILED|3:0|gres/gpu=4|high|1-00:00:00",
                  f"3|stop|debug|{t}|2024-05-01T10:02:00|2024-05-01T10:03:00|CANCELLED by 0|0:15|gres/gpu=1|normal|"
                  "UNLIMITED",
                  f"4|slow|gpu|{t}|2024-05-01T10:00:00|2024-05-01T10:30:00|TIMEOUT|0:0|gres/gpu=2|normal|00:30:00",
                  f"5|node|gpu|{t}|2024-05-01T10:00:00|2024-05-01T10:05:00|NODE_FAIL|0:0|gres/gpu=8|normal|"
                  "Partition_Limit",
                  f"5.batch|batch||{t}|2024-05-01T10:00:00|2024-05-01T10:05:00|CANCELLED|0:9|gres/gpu=8||")
    jobs = {j.name: j for j in read_sacct(path).jobs}
    assert set(jobs) == {"1", "2", "3", "4", "5"}
    assert [jobs[k].final_state for k in "12345"] == ["completed", "failed", "cancelled", "failed", "failed"]
    assert [jobs[k].state for k in "12345"] == ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"]
    j = jobs["2"]
    assert (j.exit_code, j.signal, j.partition, j.qos, j.time_limit_s) == (3, None, "gpu", "high", 86400)
    assert j.duration == 600 and j.wait_s == 30
    assert jobs["3"].signal == 15 and jobs["3"].exit_code is None and jobs["3"].time_limit_s is None
    assert jobs["1"].time_limit_s == 7200 and jobs["1"].wait_s == 60 and jobs["5"].time_limit_s is None
    rec = j.record()
    assert rec["final_state"] == "failed" and rec["exit_code"] == 3 and rec["recorded_wait_s"] == 30


def test_sacct_without_the_new_columns_still_reads(tmp_path):
    p = tmp_path / "old.txt"
    p.write_text("JobID|Submit|Start|End|AllocTRES\n1|2024-05-01T10:00:00|2024-05-01T10:00:00|"
                 "2024-05-01T10:10:00|gres/gpu=8\n")
    [j] = read_sacct(str(p)).jobs
    assert j.final_state == "completed" and j.exit_code is None and j.partition == "" and j.time_limit_s is None


def test_failed_history_replays_as_failed(tmp_path):
    import json

    from tests_cli_helpers import ROOT, run
    t = "2024-05-01T10:00:00"
    trace = _trace(tmp_path,
                   f"1|ok|gpu|{t}|{t}|2024-05-01T11:00:00|COMPLETED|0:0|gres/gpu:h200=8|normal|02:00:00",
                   f"2|boom|gpu|{t}|{t}|2024-05-01T10:10:00|FAILED|3:0|gres/gpu:h200=8|normal|02:00:00")
    scen = tmp_path / "s.yaml"
    scen.write_text(f"name: r\ncluster: {ROOT / 'tests/integration/data/slurm-2node.yaml'}\npolicy: fifo\n"
                    f"workloads:\n  - {{kind: trace, name: sacct, format: sacct, path: {trace}}}\n")
    s = json.loads(run("simulate", "run", str(scen), "--json", check_rc=0).stdout)
    assert (s["jobs"]["completed"], s["jobs"]["failed"]) == (1, 1)
