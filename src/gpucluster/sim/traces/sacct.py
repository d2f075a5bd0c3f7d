"""Slurm accounting exports: `sacct -P` (pipe-separated, header line).

Export with, for example:
    sacct -a -P -X -S 2024-01-01 -o JobID,Submit,Start,End,Elapsed,State,ExitCode,AllocTRES,ReqTRES,Partition,QOS,Timelimit

GPUs come from AllocTRES (else ReqTRES, AllocGRES, ReqGRES): `gres/gpu=16` or
`gres/gpu:h200=16` or `gpu:8`. Run time is End - Start (else Elapsed). Job steps
(`123.batch`, `123.0`) are skipped, as are jobs without GPUs or that never started.

Each job keeps what the history says about how it ended: its Slurm state (a FAILED, TIMEOUT,
NODE_FAIL or CANCELLED job ran for End - Start and then did not complete), exit code and
signal (`ExitCode` 3:0, 0:9), partition, QOS, time limit and the wait it recorded (Start -
Submit). `SacctJob.final_state` is the simulator's name for that end (completed, failed or
cancelled); the trace workload replays the job as ending so at its recorded run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from gpucluster.errors import UserError
from gpucluster.sim.traces import TraceJob, TraceRead, readers

# Slurm job states by how the simulator counts them. RUNNING (End Unknown, run time from Elapsed)
# and REQUEUED are replayed as what they are so far: work that ran, counted as completed.
FAILED_STATES = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
CANCELLED_STATES = ("CANCELLED", "PREEMPTED", "REVOKED")
_UNLIMITED = ("UNLIMITED", "Partition_Limit", "INVALID")


@dataclass
class SacctJob(TraceJob):
    """A TraceJob with what sacct recorded about its end and its queue."""
    state: str = "COMPLETED"          # Slurm's state, first word ("CANCELLED by 0" -> CANCELLED)
    exit_code: int | None = None      # 0..255; None: unknown or killed by a signal
    signal: int | None = None
    partition: str = ""
    qos: str = ""
    time_limit_s: float | None = None  # None: unlimited or not in the export
    wait_s: float = 0.0               # recorded Start - Submit

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
                "partition": self.partition, "qos": self.qos, "time_limit_s": self.time_limit_s,
                "recorded_wait_s": self.wait_s, "final_state": self.final_state}

_TRES_GPU = re.compile(r"gres/gpu(?::([\w.-]+))?=(\d+)")
_GRES_GPU = re.compile(r"gpu(?::([\w.-]+))?:(\d+)")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
GPU_FIELDS = ("AllocTRES", "ReqTRES", "AllocGRES", "ReqGRES")
UNSET = ("", "Unknown", "None", "N/A")


def parse_time(text: str) -> float | None:
    text = text.strip()
    if text in UNSET:
        return None
    return datetime.fromisoformat(text).timestamp()


def parse_elapsed(text: str) -> float:
    m = _ELAPSED.match(text.strip())
    if not m:
        raise ValueError(text)
    d, h, mi, s = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + float(s)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from sacct's EXIT:SIGNAL; a signal means no exit code."""
    m = re.match(r"^\s*(\d+)(?::(\d+))?\s*$", text or "")
    if not m:
        return None, None
    code, sig = int(m.group(1)), int(m.group(2) or 0)
    if code > 255 or sig > 255:
        return None, None
    return (None, sig) if sig else (code, None)


def parse_time_limit(text: str) -> float | None:
    """sacct Timelimit: [D-]HH:MM:SS, MM:SS, UNLIMITED or Partition_Limit (None)."""
    text = (text or "").strip()
    if text in UNSET or text in _UNLIMITED:
        return None
    try:
        return parse_elapsed(text)
    except ValueError:
        return None


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
            row = dict(zip(header, parts))
            job_id = row.get("JobID", "")
            if "." in job_id:
                out.skipped["job steps"] += 1
                continue
            try:
                submit = parse_time(row["Submit"])
                start = parse_time(row.get("Start", ""))
                end = parse_time(row.get("End", ""))
            except ValueError:
                out.bad_row(lineno, "unreadable time")
                continue
            if submit is None:
                out.bad_row(lineno, "no submit time")
                continue
            if start is None:
                out.skipped["never started"] += 1
                continue
            if end is not None:
                duration = end - start
            else:
                try:
                    duration = parse_elapsed(row.get("Elapsed", ""))
                except ValueError:
                    out.bad_row(lineno, "no end time or elapsed")
                    continue
            if duration < 0 or start < submit:
                out.bad_row(lineno, "times out of order")
                continue
            g = gpus_of(row)
            if g is None or g[0] == 0:
                out.skipped["without GPUs"] += 1
                continue
            state = (row.get("State") or "COMPLETED").split()
            code, sig = parse_exit_code(row.get("ExitCode", ""))
            facts = {"state": state[0].upper() if state else "COMPLETED", "exit_code": code, "signal": sig,
                     "partition": row.get("Partition", ""), "qos": row.get("QOS", ""),
                     "time_limit_s": parse_time_limit(row.get("Timelimit", "")), "wait_s": start - submit}
            rows.append((submit, duration, g[0], g[1], job_id, facts))
            if limit is not None and len(rows) >= limit:
                break
    t0 = min((r[0] for r in rows), default=0.0)
    for submit, duration, gpus, gtype, job_id, facts in rows:
        t = _catalog_name(gtype)
        out.jobs.append(SacctJob(submit - t0, duration, gpus, gpu_types=(t,) if t else None, name=job_id, **facts))
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
