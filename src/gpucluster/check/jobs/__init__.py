"""Job-file parsers. `parse_job(path)` picks the format from the name and content:
.json -> DeepSpeed config; .yaml/.yml -> Kubernetes manifest; NAME=VALUE lines only ->
NCCL environment file; anything else -> shell (sbatch script or launch command lines).

A file that cannot be read is bad input (`UserError`, exit 2); a file that is read but
does not parse becomes problems with their lines, which the engine reports as findings.

Everything is bounded before it is parsed: the file (1 MiB: job files are a few KiB, and shlex
and the YAML composer must not grind on a 100 MB one), each logical shell line (shell.py) and
each value the rules will read (4,096 characters: Python refuses int() of more than 4,300 digits,
and no option, count or NCCL setting is that long).
"""

from __future__ import annotations

from pathlib import Path

from gpucluster.errors import UserError

from gpucluster.check.jobs.deepspeed import parse_deepspeed
from gpucluster.check.jobs.k8s import parse_k8s
from gpucluster.check.jobs.model import Command, JobFile, K8sWorkload, Problem, Setting
from gpucluster.check.jobs.nccl_env import looks_like_env, parse_env
from gpucluster.check.jobs.shell import parse_shell
from gpucluster.specs.loader import read_text

__all__ = ["Command", "JobFile", "K8sWorkload", "Problem", "Setting", "parse_job", "parse_text"]

MAX_JOB_BYTES = 2**20
MAX_VALUE = 4096


def parse_text(path: str, text: str) -> JobFile:
    if len(text) > MAX_JOB_BYTES:
        raise UserError(f"larger than {MAX_JOB_BYTES // 2**20} MiB: too big for a job file (is it the right file?)",
                        file=path)
    return _bounded(_parse(path, text))


def _parse(path: str, text: str) -> JobFile:
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return parse_deepspeed(path, text)
    if suffix in (".yaml", ".yml"):
        return parse_k8s(path, text)
    if suffix == ".env" or (looks_like_env(text) and "#SBATCH" not in text):
        return parse_env(path, text)
    return parse_shell(path, text)


def _bounded(job: JobFile) -> JobFile:
    """Drop every value longer than MAX_VALUE, as a problem at its line, so that no rule meets it."""
    def keep(name: str, s: Setting) -> bool:
        if len(s.value) <= MAX_VALUE:
            return True
        job.problems.append(Problem(s.line, f"{name}: value of {len(s.value):,} characters (more than "
                                            f"{MAX_VALUE:,}), not read"))
        return False

    job.env = {k: s for k, s in job.env.items() if keep(k, s)}
    job.directives = {k: s for k, s in job.directives.items() if keep(f"#SBATCH --{k}", s)}
    for c in job.commands:
        c.options = {k: s for k, s in c.options.items() if keep(f"--{k}", s)}
    for w in job.workloads:
        for attr in ("gpus_per_pod", "pods", "nproc_per_node"):
            s = getattr(w, attr)
            if s is not None and not keep(attr, s):
                setattr(w, attr, None)
    return job


def parse_job(path: str) -> JobFile:
    return parse_text(path, read_text(path, limit=MAX_JOB_BYTES))
