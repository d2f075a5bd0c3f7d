"""Slurm accounting exports: `sacct -P` (pipe-separated, header line).

Export with, for example (what `gpucluster slurm import` runs):
    sacct -a -P -X -S 2024-01-01 -o JobID,JobName,User,Account,Partition,QOS,Submit,Eligible,Start,End,\
Elapsed,Timelimit,State,ExitCode,AllocTRES,ReqTRES,NNodes

GPUs come from AllocTRES (else ReqTRES, AllocGRES, ReqGRES): `gres/gpu=16` or
`gres/gpu:h200=16` or `gpu:8`. Run time is End - Start (else Elapsed). Job steps
(`123.batch`, `123.0`) are skipped, as are jobs without GPUs; jobs that never started
are counted by why (cancelled while pending, still pending, other), never replayed:
their run time is unknown.

Each job keeps what the history says about its queue and its end: partition, QOS,
account, user, time limit, Slurm state (a FAILED, TIMEOUT, NODE_FAIL or CANCELLED job
ran for End - Start and then did not complete), exit code and signal (`ExitCode` 3:0,
0:9) and the wait it recorded: Start - Eligible (Slurm's scheduler sees a job from its
eligible time: after a --begin or a dependency), Start - Submit when Eligible is not in
the export. The simulator's arrival is that same moment, so simulated and recorded
waits measure the same thing. `SacctJob.final_state` is the simulator's name for the end
(completed, failed or cancelled).

A row whose fields cannot be read (a time, a time limit, an exit code, a state Slurm
does not have) is a bad row, counted by reason with its first line, never a silent
default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from gpucluster.errors import UserError
from gpucluster.sim.traces import TraceJob, TraceRead, readers

# Slurm job states (sacct --helpstate) by how the simulator counts them. RUNNING (End Unknown,
# run time from Elapsed), REQUEUED, SUSPENDED and RESIZING are replayed as what they are so far:
# work that ran, counted as completed.
FAILED_STATES = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
CANCELLED_STATES = ("CANCELLED", "PREEMPTED", "REVOKED")
OTHER_STATES = ("COMPLETED", "RUNNING", "PENDING", "REQUEUED", "SUSPENDED", "RESIZING")
STATES = FAILED_STATES + CANCELLED_STATES + OTHER_STATES
_UNLIMITED = ("UNLIMITED", "Partition_Limit", "INVALID")


@dataclass
class SacctJob(TraceJob):
    """A TraceJob with what sacct recorded about its end and its queue."""
    state: str = "COMPLETED"          # Slurm's state, first word ("CANCELLED by 0" -> CANCELLED)
    exit_code: int | None = None      # 0..255; None: unknown or killed by a signal
    signal: int | None = None
    partition: str = ""
    qos: str = ""
    account: str = ""
    user: str = ""
    nodes: int | None = None          # NNodes
    time_limit_s: float | None = None  # None: unlimited, the partition's limit, or not in the export
    wait_s: float = 0.0               # recorded Start - Eligible (Start - Submit without Eligible)
    eligible_delay_s: float = 0.0     # Eligible - Submit (a --begin or a dependency held it)

    @property
    def final_state(self) -> str:
        if self.state in FAILED_STATES:
            return "failed"
        if self.state in CANCELLED_STATES:
            return "cancelled"
        return "completed"

    def record(self) -> dict:
        """The recorded facts, for a simulator job's `extra`."""
        return {"slurm_state": self.state, "exit_code": self.exit_code, "signal": self.signal,
                "partition": self.partition, "qos": self.qos, "account": self.account, "user": self.user,
                "nodes": self.nodes, "time_limit_s": self.time_limit_s, "recorded_wait_s": self.wait_s,
                "eligible_delay_s": self.eligible_delay_s, "final_state": self.final_state}

    def job_fields(self, time_scale: float = 1.0) -> dict:
        """The simulator Job's Slurm fields. A job that ran past its limit without a TIMEOUT (Slurm's
        OverTimeLimit grace, KillWait) keeps its recorded end: its limit is raised to its run time,
        so the replay does not turn it into a timeout."""
        limit = self.time_limit_s
        if limit is not None and self.state != "TIMEOUT":
            limit = max(limit, self.duration)
        return {"time_limit_s": None if limit is None else limit * time_scale, "partition": self.partition,
                "qos": self.qos, "account": self.account, "recorded_wait_s": self.wait_s * time_scale}


_TRES_GPU = re.compile(r"gres/gpu(?::([\w.-]+))?=(\d+)")
_GRES_GPU = re.compile(r"gpu(?::([\w.-]+))?:(\d+)")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_LIMIT = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
GPU_FIELDS = ("AllocTRES", "ReqTRES", "AllocGRES", "ReqGRES")
UNSET = ("", "Unknown", "None", "N/A")


def parse_time(text: str) -> float | None:
    text = text.strip()
    if text in UNSET:
        return None
    return datetime.fromisoformat(text).timestamp()


def parse_elapsed(text: str) -> float:
    """sacct Elapsed: [D-]HH:MM:SS or MM:SS."""
    m = _ELAPSED.match(text.strip())
    if not m:
        raise ValueError(text)
    d, h, mi, s = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + float(s)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from sacct's EXIT:SIGNAL; a signal means no exit code. Raises
    ValueError on text that is not EXIT[:SIGNAL] with both in 0..255; empty text is unknown."""
    text = (text or "").strip()
    if not text:
        return None, None
    m = re.match(r"^(\d+)(?::(\d+))?$", text)
    if not m:
        raise ValueError(text)
    code, sig = int(m.group(1)), int(m.group(2) or 0)
    if code > 255 or sig > 255:
        raise ValueError(text)
    return (None, sig) if sig else (code, None)


def parse_time_limit(text: str) -> float | None:
    """A Slurm time limit in seconds: every form sbatch --time takes and sacct prints
    (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS). None for no limit of the job's own:
    UNLIMITED, Partition_Limit (the partition's MaxTime, not in the export), INVALID or empty.
    Raises ValueError on anything else."""
    text = (text or "").strip()
    if text in UNSET or text in _UNLIMITED:
        return None
    m = _LIMIT.match(text)
    if not m:
        raise ValueError(text)
    d, dh, dm, ds, a, b, c = m.groups()
    if d is not None:   # days-hours[:minutes[:seconds]]
        return int(d) * 86400 + int(dh) * 3600 + int(dm or 0) * 60 + int(ds or 0)
    if c is not None:   # hours:minutes:seconds
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:   # minutes:seconds
        return int(a) * 60 + int(b)
    return int(a) * 60  # minutes


def gpus_of(row: dict[str, str]) -> tuple[int, str | None] | None:
    """(GPUs, type or None) from the first GPU field present; None when no field has GPUs."""
    for name in GPU_FIELDS:
        text = row.get(name) or ""
        pat = _TRES_GPU if "TRES" in name else _GRES_GPU
        found = pat.findall(text)
        if found:
            typed = [(t, int(n)) for t, n in found if t]
            if typed:  # gres/gpu=16 and gres/gpu:h200=16 both appear: the typed one names the type
                return sum(n for _, n in typed), typed[0][0]
            return int(found[0][1]), None
    return None


class _Bad(Exception):
    """A row that cannot be read: its reason."""


def _job_of(row: dict[str, str], out: TraceRead) -> tuple[float, float, int, str | None, str, dict] | None:
    """One row as (arrival, run time, GPUs, GRES type, job id, facts), None when not replayed
    (counted in out.skipped); raises _Bad for a corrupt row."""
    job_id = row.get("JobID", "")
    if "." in job_id:
        out.skipped["job steps"] += 1
        return None
    words = (row.get("State") or "COMPLETED").split()
    state = words[0].upper() if words else "COMPLETED"
    if state not in STATES:
        raise _Bad(f"unknown state {state[:40]!r}")
    try:
        submit = parse_time(row["Submit"])
        eligible = parse_time(row.get("Eligible", ""))
        start = parse_time(row.get("Start", ""))
        end = parse_time(row.get("End", ""))
    except ValueError:
        raise _Bad("unreadable time") from None
    if submit is None:
        raise _Bad("no submit time")
    if start is None:   # never ran: no run time to replay
        if state in CANCELLED_STATES:
            out.skipped["cancelled before starting"] += 1
        elif state == "PENDING":
            out.skipped["still pending"] += 1
        else:
            out.skipped["never started"] += 1
        return None
    try:
        limit = parse_time_limit(row.get("Timelimit", ""))
    except ValueError:
        raise _Bad("unreadable time limit") from None
    try:
        code, sig = parse_exit_code(row.get("ExitCode", ""))
    except ValueError:
        raise _Bad("unreadable exit code") from None
    if end is not None:
        duration = end - start
    else:
        try:
            duration = parse_elapsed(row.get("Elapsed", ""))
        except ValueError:
            raise _Bad("no end time or elapsed") from None
    arrival = submit if eligible is None else eligible
    if duration < 0 or start < submit or (eligible is not None and (eligible < submit or start < eligible)):
        raise _Bad("times out of order")
    nn = (row.get("NNodes") or "").strip()
    if nn and not nn.isdigit():
        raise _Bad("unreadable NNodes")
    g = gpus_of(row)
    if g is None or g[0] == 0:
        out.skipped["without GPUs"] += 1
        return None
    facts = {"state": state, "exit_code": code, "signal": sig, "partition": row.get("Partition", ""),
             "qos": row.get("QOS", ""), "account": row.get("Account", ""), "user": row.get("User", ""),
             "nodes": int(nn) if nn else None, "time_limit_s": limit, "wait_s": start - arrival,
             "eligible_delay_s": arrival - submit}
    return arrival, duration, g[0], g[1], job_id, facts


@readers.register("sacct", "slurm")
def read_sacct(path: str, limit: int | None = None) -> TraceRead:
    out = TraceRead(path, "sacct")
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline().rstrip("\n").split("|")
        if "Submit" not in header or not any(g in header for g in GPU_FIELDS):
            raise UserError("not a sacct -P export with Submit and a GPU field (AllocTRES, ReqTRES, AllocGRES or "
                            "ReqGRES); export with sacct -P -X -o JobID,Submit,Start,End,Elapsed,State,AllocTRES",
                            file=path, line=1)
        rows: list[tuple[float, float, int, str | None, str, dict]] = []
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            out.rows += 1
            parts = line.split("|")
            if len(parts) != len(header):
                out.bad_row(lineno, f"{len(parts)} fields, header has {len(header)}")
                continue
            try:
                got = _job_of(dict(zip(header, parts, strict=True)), out)
            except _Bad as why:
                out.bad_row(lineno, str(why))
                continue
            if got is not None:
                rows.append(got)
                if limit is not None and len(rows) >= limit:
                    break
    t0 = min((r[0] for r in rows), default=0.0)
    for arrival, duration, gpus, gtype, job_id, facts in rows:
        t = _catalog_name(gtype)
        out.jobs.append(SacctJob(arrival - t0, duration, gpus, gpu_types=(t,) if t else None, name=job_id, **facts))
    return out


def _catalog_name(gres_type: str | None) -> str | None:
    """A Slurm GRES type (h100, a100_80g) as a catalog GPU name, or None (any type) when unknown."""
    if not gres_type:
        return None
    from gpucluster.catalog import catalog
    for cand in (gres_type, gres_type.replace("_", "-")):
        if cand in catalog.gpus:
            return catalog.gpus.canonical(cand)
    return None


EXPORT_FIELDS = ("JobID", "Account", "Partition", "QOS", "Submit", "Eligible", "Start", "End", "Elapsed", "Timelimit",
                 "State", "ExitCode", "AllocTRES")


def _clock(t0: float, s: float | None) -> str:
    if s is None:
        return "Unknown"
    return datetime.fromtimestamp(round(t0 + s)).isoformat()


def _limit_text(s: float | None) -> str:
    if s is None:
        return "UNLIMITED"
    s = round(s)
    d, rest = divmod(s, 86400)
    return (f"{d}-" if d else "") + f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def write_sacct(jobs: list, path: str, t0: float = 1.7e9) -> int:
    """Simulated jobs as a `sacct -P -X` export (times in whole seconds from `t0`, as sacct prints
    them), so a simulated history can be replayed like a real one. A job killed at its time limit
    is TIMEOUT, other failures FAILED (exit 1), a job that never started CANCELLED or PENDING.
    Returns the rows written."""
    from gpucluster.sim.jobs import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING

    rows = ["|".join(EXPORT_FIELDS)]
    for j in sorted(jobs, key=lambda j: (j.submit, j.seq)):
        started = j.first_start is not None
        state = {COMPLETED: "COMPLETED", FAILED: "TIMEOUT" if j.reason.startswith("timeout") else "FAILED",
                 CANCELLED: "CANCELLED", RUNNING: "RUNNING", PENDING: "PENDING"}[j.state]
        end = j.end if j.state not in (RUNNING, PENDING) else None
        if not started:
            elapsed = 0.0
        else:   # still running: what it ran so far (its attained GPU-seconds over its GPUs)
            elapsed = end - j.first_start if end is not None else j.attained / max(j.gpus, 1)
        gpu = f"gres/gpu:{j.gpu_type}={j.gpus}" if j.gpu_type else f"gres/gpu={j.gpus}"
        rows.append("|".join([str(j.id), j.account or j.queue, j.partition, j.qos, _clock(t0, j.submit),
                              _clock(t0, j.submit), _clock(t0, j.first_start), _clock(t0, end),
                              _limit_text(elapsed), _limit_text(j.time_limit_s), state,
                              "1:0" if state == "FAILED" else "0:0", gpu]))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    return len(rows) - 1
