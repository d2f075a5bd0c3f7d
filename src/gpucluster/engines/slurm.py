"""A Slurm client: submit, follow (squeue --json, then sacct --json or scontrol once the job has
left the queue), history as `sacct -P`. Every call runs under a timeout, so an unreachable
controller gives a clear message instead of a hang."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from gpucluster.errors import UserError

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE")
HISTORY_FIELDS = ("JobID", "JobName", "User", "Partition", "Submit", "Start", "End", "Elapsed", "State",
                  "ExitCode", "AllocTRES", "ReqTRES", "NNodes")


@dataclass
class JobStatus:
    job_id: int
    state: str                      # Slurm's state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED...)
    name: str = ""
    exit_code: str = ""
    nodes: str = ""
    reason: str = ""
    stdout: str | None = None       # the job's output file, when Slurm says
    source: str = ""                # squeue, sacct or scontrol
    extra: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def failed(self) -> bool:
        return self.done and self.state != "COMPLETED"

    def to_json(self) -> dict:
        return {"job_id": self.job_id, "name": self.name, "state": self.state, "exit_code": self.exit_code,
                "nodes": self.nodes, "reason": self.reason, "stdout": self.stdout, "source": self.source,
                "failed": self.failed}


def _state(value) -> str:
    """job_state is a string in openapi v0.0.38, a list in later versions; sacct nests it."""
    if isinstance(value, dict):
        value = value.get("current", "")
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value).split()[0].upper() if value else "UNKNOWN"


def _exit(value) -> str:
    if isinstance(value, dict):
        rc = value.get("return_code", "")
        sig = (value.get("signal") or {}).get("signal_id", "") if isinstance(value.get("signal"), dict) else ""
        return f"{rc}:{sig or 0}"
    return "" if value is None else str(value)


class SlurmClient:
    def __init__(self, timeout: float = 30.0, env: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.env = env

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout,
                               env=None if self.env is None else {**os.environ, **self.env})
        except FileNotFoundError:
            raise UserError(f"{argv[0]} not found: install the Slurm client (e.g. apt-get install slurm-client) "
                            "or run where Slurm is") from None
        except subprocess.TimeoutExpired:
            conf = (self.env or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
            raise UserError(f"Slurm did not answer within {self.timeout:g} s ({argv[0]}): is slurmctld up and "
                            f"reachable? (SLURM_CONF={conf})") from None
        if check and p.returncode:
            raise UserError(f"{argv[0]} failed: {p.stderr.strip() or p.stdout.strip()}")
        return p

    # -- submit -----------------------------------------------------------------------
    def submit(self, script: str, args: list[str] = ()) -> int:
        out = self._run(["sbatch", "--parsable", *args, script]).stdout.strip()
        m = re.match(r"^(\d+)", out)
        if not m:
            raise UserError(f"sbatch did not print a job id: {out!r}")
        return int(m.group(1))

    def cancel(self, job_id: int) -> None:
        self._run(["scancel", str(job_id)])

    # -- status -----------------------------------------------------------------------
    def status(self, job_id: int) -> JobStatus | None:
        for how in (self._squeue, self._sacct, self._scontrol):
            st = how(job_id)
            if st is not None:
                return st
        return None

    def _squeue(self, job_id: int) -> JobStatus | None:
        p = self._run(["squeue", "--json", "-j", str(job_id)], check=False)
        jobs = _jobs(p.stdout) if p.returncode == 0 else []
        for j in jobs:
            if int(j.get("job_id", -1)) == job_id:
                return JobStatus(job_id, _state(j.get("job_state")), j.get("name", ""), _exit(j.get("exit_code")),
                                 j.get("nodes", ""), j.get("state_reason", ""), j.get("standard_output"), "squeue")
        return None

    def _sacct(self, job_id: int) -> JobStatus | None:
        p = self._run(["sacct", "--json", "-X", "-j", str(job_id)], check=False)
        for j in _jobs(p.stdout) if p.returncode == 0 else []:
            if int(j.get("job_id", -1)) == job_id:
                st = j.get("state") or {}
                return JobStatus(job_id, _state(st), j.get("name", ""), _exit(j.get("exit_code")), j.get("nodes", ""),
                                 st.get("reason", "") if isinstance(st, dict) else "", None, "sacct")
        return None

    def _scontrol(self, job_id: int) -> JobStatus | None:
        p = self._run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        if p.returncode or "JobId=" not in p.stdout:
            return None
        kv = dict(re.findall(r"(\w+)=(\S*)", p.stdout))
        return JobStatus(job_id, _state(kv.get("JobState")), kv.get("JobName", ""), kv.get("ExitCode", ""),
                         kv.get("NodeList", ""), kv.get("Reason", ""), kv.get("StdOut"), "scontrol")

    def follow(self, job_id: int, *, poll_s: float = 1.0, timeout_s: float | None = None,
               on_change: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Poll until the job ends. A job that leaves every view is reported as LOST with what was
        last seen (never silently as success)."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        last: JobStatus | None = None
        misses = 0
        while True:
            st = self.status(job_id)
            if st is None:
                misses += 1
                if misses >= 5:
                    return JobStatus(job_id, "LOST", last.name if last else "", reason="the job left squeue and "
                                     "neither sacct nor scontrol knows it", source="none")
            else:
                misses = 0
                if on_change and (last is None or st.state != last.state):
                    on_change(st)
                last = st
                if st.done:
                    if st.stdout is None or "%" in st.stdout:  # sacct does not say, squeue leaves %j
                        sc = self._scontrol(job_id)
                        st.stdout = sc.stdout if sc and sc.stdout else _expand(st.stdout, st)
                    return st
            if end is not None and time.monotonic() > end:
                raise UserError(f"job {job_id} still {last.state if last else 'unknown'} after {timeout_s:g} s "
                                "(it keeps running; follow again with `gpucluster slurm status`)")
            time.sleep(poll_s)

    # -- history ----------------------------------------------------------------------
    def history(self, since: str = "2000-01-01", until: str | None = None, all_users: bool = True) -> str:
        """`sacct -P -X` with the fields the simulator's sacct reader reads."""
        argv = ["sacct", "-P", "-X", "-S", since, "-o", ",".join(HISTORY_FIELDS)]
        argv += ["-E", until] if until else []
        argv += ["-a"] if all_users else []
        p = self._run(argv, check=False)
        if p.returncode:
            msg = p.stderr.strip()
            if "accounting_storage/none" in msg or "not running a supported accounting" in msg.lower():
                raise UserError("this Slurm keeps no job history (AccountingStorageType=accounting_storage/none); "
                                "sacct needs slurmdbd")
            raise UserError(f"sacct failed: {msg}")
        return p.stdout


def _expand(path: str | None, st: JobStatus) -> str | None:
    """Slurm's filename patterns (%j job id, %A array job, %x job name, %% a percent sign)."""
    if path is None:
        return None
    return re.sub(r"%(%|j|A|x)", lambda m: {"%": "%", "j": str(st.job_id), "A": str(st.job_id),
                                            "x": st.name}[m.group(1)], path)


def _jobs(text: str) -> list[dict]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    jobs = data.get("jobs") if isinstance(data, dict) else None
    return jobs if isinstance(jobs, list) else []


def find_bench_result(text: str) -> dict | None:
    """The last `gpucluster bench collective --json` document in a job's output."""
    dec, found = json.JSONDecoder(), None
    for m in re.finditer(r"^\{", text, re.MULTILINE):
        try:
            obj, _ = dec.raw_decode(text[m.start():])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("schema") == "gpucluster-bench-collective/v1":
            found = obj
    return found
