"""A Slurm client: submit, follow (squeue --json, then sacct -P or scontrol once the job has left
the queue), history as `sacct -P`. Every call runs under a timeout, so an unreachable controller
gives a clear message instead of a hang.

Exit codes are read where each view is right (checked against a real Slurm 22.05):
- `squeue --json` (openapi v0.0.38) gives the raw wait(2) status: `exit 3` is 768 (3 << 8), a
  job killed by SIGKILL is 9; `decode_wait_status` splits it.
- `scontrol show job` and `sacct -P -o ExitCode` give `EXIT:SIGNAL` (3:0, 0:9).
- `sacct --json` (v0.0.38) reports `return_code: 0` for a job that ended `exit 3`, so it is not
  used for exit codes at all.
- `standard_output` is "" in `squeue --json` unless the job set `--output`, and sacct 22.05 has no
  StdOut field; `slurm submit` therefore always passes an explicit path and reads it back."""

from __future__ import annotations

import json
import os
import re
import signal as _signal
import subprocess
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence

from gpucluster.engines.process import Finished, OutputTooLarge, run_bounded
from gpucluster.errors import UserError

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE")
HISTORY_FIELDS = ("JobID", "JobName", "User", "Account", "Partition", "QOS", "Submit", "Eligible", "Start", "End",
                  "Elapsed", "Timelimit", "State", "ExitCode", "AllocTRES", "ReqTRES", "NNodes")
STATUS_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Reason")
_UNSET_PATH = ("", "(null)", "None")
STATUS_CAP = 16 << 20       # squeue/sacct/scontrol output about one job: a few kB
HISTORY_CAP = 256 << 20     # sacct history: ~1.5M jobs at ~170 bytes a row
TAIL_BYTES = 4000           # the end of a job's output shown after it ends
MAX_QUOTE = 200             # characters of a program's message quoted in an error line


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """A program's message on one line, at most `limit` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit] + f"... ({len(one):,} characters)"


def decode_wait_status(raw: int) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait(2) status as `squeue --json` v0.0.38 gives it: the exit
    code in bits 8-15 when the process exited, the signal in bits 0-6 when one killed it. Values
    outside 16 bits are Slurm's NO_VAL markers: unknown."""
    if raw < 0 or raw > 0xFFFF:
        return None, None
    sig = raw & 0x7F
    if sig == 0:
        return (raw >> 8) & 0xFF, None
    if sig == 0x7F:          # stopped, not ended: no exit code yet
        return None, None
    return None, sig


def parse_exit_pair(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from Slurm's `EXIT:SIGNAL` notation (scontrol ExitCode, sacct -P ExitCode)."""
    m = re.match(r"^\s*(\d{1,10})(?::(\d{1,10}))?\s*$", text if isinstance(text, str) else "")
    if not m:
        return None, None
    code, sig = int(m.group(1)), int(m.group(2) or 0)
    if sig:
        return (None, sig) if sig < 128 else (None, None)
    return (code, None) if code <= 255 else (None, None)


def _exit_of(value) -> tuple[int | None, int | None]:
    """squeue --json exit_code: a raw wait status (v0.0.38) or, in later versions, a mapping."""
    if isinstance(value, bool):
        return None, None
    if isinstance(value, int):
        return decode_wait_status(value)
    if isinstance(value, dict):
        sig = value.get("signal")
        sig_id = sig.get("signal_id") if isinstance(sig, dict) else None
        if value.get("status") == "SIGNALED" and isinstance(sig_id, int) and sig_id > 0:
            return None, sig_id
        rc = value.get("return_code")
        if isinstance(rc, dict):             # v0.0.40+: {"set": true, "number": 3}
            rc = rc.get("number") if rc.get("set", True) else None
        return (rc, None) if isinstance(rc, int) and 0 <= rc <= 255 else (None, None)
    if isinstance(value, str):
        return parse_exit_pair(value)
    return None, None


def signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


@dataclass
class JobStatus:
    job_id: int
    state: str                      # Slurm's state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED...)
    name: str = ""
    exit_code: int | None = None    # the batch script's exit status, 0..255; None: unknown or killed by a signal
    signal: int | None = None       # the signal that killed it, if one did
    nodes: str = ""
    reason: str = ""
    stdout: str | None = None       # the job's output file, when known
    source: str = ""                # squeue, sacct or scontrol
    extra: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def failed(self) -> bool:
        return self.done and self.state != "COMPLETED"

    @property
    def slurm_exit(self) -> str:
        """Slurm's own notation, EXIT:SIGNAL (as sacct and scontrol print it)."""
        if self.signal:
            return f"0:{self.signal}"
        return "" if self.exit_code is None else f"{self.exit_code}:0"

    def exit_text(self) -> str:
        if self.signal:
            return f"killed by signal {self.signal} ({signal_name(self.signal)})"
        return f"exit code {'?' if self.exit_code is None else self.exit_code}"

    def to_json(self) -> dict:
        return {"job_id": self.job_id, "name": self.name, "state": self.state, "exit_code": self.exit_code,
                "signal": self.signal, "slurm_exit_code": self.slurm_exit, "nodes": self.nodes,
                "reason": self.reason, "stdout": self.stdout, "source": self.source, "failed": self.failed}


def _state(value) -> str:
    """job_state is a string in openapi v0.0.38, a list in later versions; sacct nests it and says
    "CANCELLED by 0"."""
    if isinstance(value, dict):
        value = value.get("current", "")
    if isinstance(value, list):
        value = value[0] if value else ""
    words = value.split() if isinstance(value, str) else []
    # A state is a Slurm word (RUNNING, OUT_OF_MEMORY); anything else (blank, binary, 1 MB) is unknown.
    state = words[0].upper().rstrip("+") if words else ""
    return state if re.fullmatch(r"[A-Z_]{1,40}", state) else "UNKNOWN"


def _reason(text) -> str:
    return "" if text in (None, "None", "(null)") else _field(text)


def _field(value, limit: int = 1000) -> str:
    """A name, node list or reason from a Slurm program: text, cut to `limit` characters."""
    text = value if isinstance(value, str) else "" if value is None or isinstance(value, (dict, list)) else str(value)
    return text[:limit]


def _path(text) -> str | None:
    if not isinstance(text, str) or text in _UNSET_PATH or len(text) > 4096 or "\x00" in text:
        return None
    return text


class SlurmClient:
    def __init__(self, timeout: float = 30.0, env: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.env = env

    def _run(self, argv: list[str], check: bool = True, cap: int = STATUS_CAP) -> Finished:
        """Run a Slurm program; its output is untrusted (any bytes, any size: see process.py)."""
        try:
            p = run_bounded(argv, timeout_s=self.timeout, cap_bytes=cap,
                            env=None if self.env is None else {**os.environ, **self.env})
        except OutputTooLarge as exc:
            raise UserError(f"{exc}: refused (is {argv[0]} the Slurm program?)") from None
        except PermissionError:
            raise UserError(f"{argv[0]}: permission denied (not executable)") from None
        except FileNotFoundError:
            raise UserError(f"{argv[0]} not found: install the Slurm client (e.g. apt-get install slurm-client) "
                            "or run where Slurm is") from None
        except subprocess.TimeoutExpired:
            conf = (self.env or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
            raise UserError(f"Slurm did not answer within {self.timeout:g} s ({argv[0]}): is slurmctld up and "
                            f"reachable? (SLURM_CONF={conf})") from None
        if check and p.returncode:
            msg = quote(p.stderr.strip() or p.stdout.strip())
            raise UserError(f"{argv[0]} failed: {msg or f'exit {p.returncode}'}")
        return p

    # -- submit -----------------------------------------------------------------------
    def submit(self, script: str, args: Sequence[str] = ()) -> int:
        out = self._run(["sbatch", "--parsable", *args, script]).stdout.strip()
        m = re.match(r"^(\d+)", out)
        if not m or len(m.group(1)) > 18:
            raise UserError(f"sbatch did not print a job id: {quote(out)!r}")
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
            if _int(j.get("job_id")) == job_id:
                code, sig = _exit_of(j.get("exit_code"))
                return JobStatus(job_id, _state(j.get("job_state")), _field(j.get("name")), code, sig,
                                 _field(j.get("nodes")), _reason(j.get("state_reason")),
                                 _path(j.get("standard_output")), "squeue")
        return None

    def _sacct(self, job_id: int) -> JobStatus | None:
        """`sacct -P`, not `--json`: 22.05's JSON gives return_code 0 for a job that exited 3."""
        p = self._run(["sacct", "-P", "-n", "-X", "-j", str(job_id), "-o", ",".join(STATUS_FIELDS)], check=False)
        if p.returncode:
            return None
        for line in p.stdout.splitlines():
            parts = line.split("|")
            if len(parts) != len(STATUS_FIELDS) or parts[0] != str(job_id):
                continue
            row = dict(zip(STATUS_FIELDS, parts, strict=True))
            code, sig = parse_exit_pair(row["ExitCode"])
            return JobStatus(job_id, _state(row["State"]), _field(row["JobName"]), code, sig, _field(row["NodeList"]),
                             _reason(row["Reason"]), None, "sacct")
        return None

    def _scontrol(self, job_id: int) -> JobStatus | None:
        p = self._run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        if p.returncode or "JobId=" not in p.stdout:
            return None
        kv = dict(re.findall(r"(\w+)=(\S*)", p.stdout))
        name = re.search(r"JobName=(.*?) UserId=", p.stdout)   # a name may hold blanks
        code, sig = parse_exit_pair(kv.get("ExitCode", ""))
        return JobStatus(job_id, _state(kv.get("JobState")), _field(name.group(1) if name else kv.get("JobName", "")),
                         code, sig, _field(kv.get("NodeList", "")), _reason(kv.get("Reason")), _path(kv.get("StdOut")),
                         "scontrol")

    def follow(self, job_id: int, *, poll_s: float = 1.0, timeout_s: float | None = None,
               on_change: Callable[[JobStatus], None] | None = None, stdout: str | None = None) -> JobStatus:
        """Poll until the job ends. A job that leaves every view is reported as LOST with what was
        last seen (never silently as success). `stdout`: the output path the job was submitted with
        (Slurm's %j and %x patterns allowed), used when no view says where the output went."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        last: JobStatus | None = None
        misses = 0
        while True:
            st = self.status(job_id)
            if st is None:
                misses += 1
                if misses >= 5:
                    return JobStatus(job_id, "LOST", last.name if last else "", reason="the job left squeue and "
                                     "neither sacct nor scontrol knows it", source="none",
                                     stdout=expand_output(stdout, job_id, last.name if last else ""))
            else:
                misses = 0
                if on_change and (last is None or st.state != last.state):
                    on_change(st)
                last = st
                if st.done:
                    st.stdout = self.output_path(st, stdout)
                    return st
            if end is not None and time.monotonic() > end:
                raise UserError(f"job {job_id} still {last.state if last else 'unknown'} after {timeout_s:g} s "
                                "(it keeps running; follow again with `gpucluster slurm status`)")
            time.sleep(poll_s)

    def output_path(self, st: JobStatus, submitted: str | None) -> str | None:
        """scontrol expands every pattern (%N, %u...); else the path we submitted, else squeue's."""
        if st.stdout and "%" not in st.stdout:
            return st.stdout
        sc = self._scontrol(st.job_id)
        if sc and sc.stdout:
            return sc.stdout
        return expand_output(submitted or st.stdout, st.job_id, st.name)

    # -- history ----------------------------------------------------------------------
    def history(self, since: str = "2000-01-01", until: str | None = None, all_users: bool = True) -> str:
        """`sacct -P -X` with the fields the simulator's sacct reader reads."""
        argv = ["sacct", "-P", "-X", "-S", since, "-o", ",".join(HISTORY_FIELDS)]
        argv += ["-E", until] if until else []
        argv += ["-a"] if all_users else []
        p = self._run(argv, check=False, cap=HISTORY_CAP)
        if p.returncode:
            msg = p.stderr.strip()
            if "accounting_storage/none" in msg or "not running a supported accounting" in msg.lower():
                raise UserError("this Slurm keeps no job history (AccountingStorageType=accounting_storage/none); "
                                "sacct needs slurmdbd")
            raise UserError(f"sacct failed: {quote(msg) or f'exit {p.returncode}'}")
        return p.stdout


def _int(value) -> int:
    if isinstance(value, bool):
        return -1
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1


def expand_output(path: str | None, job_id: int, name: str) -> str | None:
    """Slurm's filename patterns (%j and %J job id, %A array job, %x job name, %% a percent sign;
    a number between % and the letter zero-pads, as `%5j`); the node-side ones (%N, %t...) are
    left for scontrol, which expands them."""
    if path is None:
        return None

    def one(m: re.Match) -> str:
        if m.group(2) == "%":
            return "%"
        if m.group(2) == "x" and not name:   # the name is not known here: left for scontrol
            return m.group(0)
        value = name if m.group(2) == "x" else str(job_id)
        return value.zfill(min(int(m.group(1) or 0), 10)) if m.group(2) != "x" else value
    return re.sub(r"%(\d{0,2})(%|j|J|A|x)", one, path)


def _jobs(text: str) -> list[dict]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):   # not JSON, a 5,000-digit number, or nested 100,000 deep
        return []
    jobs = data.get("jobs") if isinstance(data, dict) else None
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def _open_output(path: str) -> int | None:
    """A job's output file open for reading, or None: not here, or not a regular file (a job
    whose output is /dev/zero or a named pipe is read as unreadable, never waited on or
    read without end)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        return None
    return fd


def read_tail(path: str, limit: int = TAIL_BYTES) -> str | None:
    """The last `limit` bytes of a job's output file; None when it cannot be read here (node-local
    storage, or not a regular file)."""
    fd = _open_output(path)
    if fd is None:
        return None
    try:
        with open(fd, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def read_output(path: str, limit: int) -> str | None:
    """At most the first `limit` bytes of a job's output file, as text; None when unreadable here."""
    fd = _open_output(path)
    if fd is None:
        return None
    try:
        with open(fd, "rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


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
