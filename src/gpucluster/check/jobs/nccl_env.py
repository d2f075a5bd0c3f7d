"""NCCL environment files: `NAME=VALUE` or `export NAME=VALUE` lines, `#` comments
(the format of /etc/nccl.conf, docker --env-file and systemd EnvironmentFile)."""

from __future__ import annotations

import shlex

from gpucluster.check.jobs.model import JobFile, Problem, Setting
from gpucluster.check.jobs.shell import ASSIGN, too_long


def looks_like_env(text: str) -> bool:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return bool(lines) and all(ASSIGN.match(ln.removeprefix("export ").strip()) for ln in lines)


def parse_env(path: str, text: str) -> JobFile:
    job = JobFile(path, "nccl-env")
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or too_long(i, line, job):
            continue
        m = ASSIGN.match(line.removeprefix("export ").strip())
        if not m:
            shown = line if len(line) <= 80 else line[:77] + "..."
            job.problems.append(Problem(i, f"expected NAME=VALUE, got {shown!r}"))
            continue
        value = m.group(2)
        try:
            parts = shlex.split(value, comments=True)
            value = parts[0] if parts else ""
        except ValueError as exc:
            job.problems.append(Problem(i, f"cannot read the value of {m.group(1)}: {exc}"))
            continue
        job.env[m.group(1)] = Setting(value, i)
    return job
