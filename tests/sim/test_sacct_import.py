"""The sacct -P reader: Slurm's time formats, states, exit codes, eligible times, corrupt rows."""

from __future__ import annotations

import pytest

from gpucluster.sim.traces import read
from gpucluster.sim.traces.sacct import (
    STATES,
    parse_exit_code,
    parse_time_limit,
    read_sacct,
)

HEADER = ("JobID|JobName|User|Account|Partition|QOS|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ExitCode|"
          "AllocTRES|ReqTRES|NNodes")
T0 = "2024-05-01T10:00:00"


def row(job_id: str, *, submit=T0, eligible=T0, start="2024-05-01T10:05:00", end="2024-05-01T11:05:00",
        elapsed="01:00:00", limit="02:00:00", state="COMPLETED", exit_code="0:0", alloc="gres/gpu=8",
        req="gres/gpu=8", partition="gpu", qos="normal", account="physics", user="ana", nnodes="1") -> str:
    return "|".join([job_id, "name", user, account, partition, qos, submit, eligible, start, end, elapsed, limit,
                     state, exit_code, alloc, req, nnodes])


def trace(tmp_path, *rows: str) -> str:
    p = tmp_path / "sacct.txt"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return str(p)


@pytest.mark.parametrize("text, seconds", [
    ("00:30:00", 1800), ("1-00:00:00", 86400), ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
    ("30:15", 30 * 60 + 15),          # MM:SS
    ("45", 45 * 60),                  # minutes (sbatch --time=45)
    ("1-12", 86400 + 12 * 3600),      # days-hours
    ("1-12:30", 86400 + 12 * 3600 + 30 * 60),   # days-hours:minutes
])
def test_time_limit_forms(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "Partition_Limit", "INVALID", "", "None"])
def test_no_limit_of_its_own(text):
    assert parse_time_limit(text) is None


@pytest.mark.parametrize("text", ["soon", "1:2:3:4", "-5", "1-", "12:xx"])
def test_unreadable_time_limits_raise(text):
    with pytest.raises(ValueError):
        parse_time_limit(text)


def test_exit_codes_and_signals():
    assert parse_exit_code("0:0") == (0, None)
    assert parse_exit_code("3:0") == (3, None)
    assert parse_exit_code("0:9") == (None, 9)      # killed by SIGKILL: no exit code
    assert parse_exit_code("255") == (255, None)
    assert parse_exit_code("") == (None, None)
    for bad in ("x:1", "256:0", "1:300", "-1:0"):
        with pytest.raises(ValueError):
            parse_exit_code(bad)


def test_every_field_survives(tmp_path):
    j, = read_sacct(trace(tmp_path, row("7", state="FAILED", exit_code="3:0", partition="long", qos="high",
                                        account="bio", user="bob", nnodes="2", alloc="gres/gpu:h100=16",
                                        limit="1-00:00:00"))).jobs
    assert (j.state, j.final_state, j.exit_code, j.signal) == ("FAILED", "failed", 3, None)
    assert (j.partition, j.qos, j.account, j.user, j.nodes) == ("long", "high", "bio", "bob", 2)
    assert j.time_limit_s == 86400 and j.gpus == 16 and j.gpu_types == ("H100-SXM5-80GB",)
    assert j.duration == 3600 and j.wait_s == 300
    rec = j.record()
    assert rec["recorded_wait_s"] == 300 and rec["account"] == "bio" and rec["slurm_state"] == "FAILED"


@pytest.mark.parametrize("state, final", [
    ("COMPLETED", "completed"), ("FAILED", "failed"), ("CANCELLED by 1000", "cancelled"), ("TIMEOUT", "failed"),
    ("NODE_FAIL", "failed"), ("OUT_OF_MEMORY", "failed"), ("PREEMPTED", "cancelled"), ("BOOT_FAIL", "failed"),
    ("DEADLINE", "failed"), ("REQUEUED", "completed"), ("RUNNING", "completed"),
])
def test_states(tmp_path, state, final):
    j, = read_sacct(trace(tmp_path, row("1", state=state))).jobs
    assert j.state == state.split()[0] and j.final_state == final


def test_recorded_wait_counts_from_eligible(tmp_path):
    # submitted at 10:00, held by a dependency until 10:30, started 10:40: Slurm's scheduler saw it
    # for 10 minutes, and the replay puts its arrival at 10:30
    got = read_sacct(trace(tmp_path, row("1"), row("2", eligible="2024-05-01T10:30:00",
                                                   start="2024-05-01T10:40:00", end="2024-05-01T11:00:00"),
                           row("3", eligible="Unknown")))
    a, b, c = got.jobs
    assert b.wait_s == 600 and b.eligible_delay_s == 1800 and b.submit - a.submit == 1800
    assert c.wait_s == 300 and c.eligible_delay_s == 0    # no Eligible: counted from Submit


def test_jobs_that_never_started_are_counted_by_why(tmp_path):
    got = read_sacct(trace(tmp_path, row("1"),
                           row("2", start="None", end="2024-05-01T10:20:00", state="CANCELLED by 0"),
                           row("3", start="Unknown", end="Unknown", state="PENDING"),
                           row("4", start="Unknown", end="2024-05-01T10:20:00", state="FAILED"),
                           row("5.batch"), row("6", alloc="cpu=4", req="cpu=4")))
    assert [j.name for j in got.jobs] == ["1"]
    assert got.skipped == {"cancelled before starting": 1, "still pending": 1, "never started": 1,
                           "job steps": 1, "without GPUs": 1}
    assert not got.bad


def test_corrupt_rows_are_counted_per_reason_never_raised(tmp_path):
    got = read_sacct(trace(tmp_path, row("1"),
                           row("2", limit="soon"),
                           row("3", exit_code="x"),
                           row("4", state="EXPLODED"),
                           row("5", start="yesterday"),
                           row("6", start="2024-05-01T09:00:00"),               # before its submit
                           row("7", eligible="2024-05-01T10:30:00"),            # started before eligible
                           row("8", end="Unknown", elapsed="later"),
                           row("9", nnodes="two"),
                           row("10", submit=""),
                           "11|short"))
    assert [j.name for j in got.jobs] == ["1"]
    assert dict(got.bad) == {"unreadable time limit": 1, "unreadable exit code": 1, "unknown state 'EXPLODED'": 1,
                             "unreadable time": 1, "times out of order": 2, "no end time or elapsed": 1,
                             "unreadable NNodes": 1, "no submit time": 1, "2 fields, header has 17": 1}
    assert got.first_bad["unreadable time limit"] == 3 and got.first_bad["times out of order"] == 7
    line = got.summary()
    assert "\n" not in line and "10 bad rows skipped" in line


def test_a_job_over_its_limit_without_timeout_keeps_its_end(tmp_path):
    got = read_sacct(trace(tmp_path, row("1", limit="00:59:00"),                     # OverTimeLimit grace
                           row("2", limit="01:00:00", state="TIMEOUT"),
                           row("3", limit="UNLIMITED")))
    a, b, c = (j.job_fields() for j in got.jobs)
    assert a["time_limit_s"] == 3600 and b["time_limit_s"] == 3600 and c["time_limit_s"] is None
    assert got.jobs[0].job_fields(0.5)["time_limit_s"] == 1800 and a["recorded_wait_s"] == 300


def test_states_list_is_slurms():
    assert {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "PENDING", "RUNNING"} <= set(STATES)


def test_registry_name():
    with pytest.raises(Exception, match="valid"):
        read("sacct-json", "x")
