"""Job-file parsers. `parse_job(path)` picks the format from the name and content:
.json -> DeepSpeed config; .yaml/.yml -> Kubernetes manifest; NAME=VALUE lines only ->
NCCL environment file; anything else -> shell (sbatch script or launch command lines).

A file that cannot be read is bad input (`UserError`, exit 2); a file that is read but
does not parse becomes problems with their lines, which the engine reports as findings.
"""

from __future__ import annotations

from pathlib import Path

from gpucluster.check.jobs.deepspeed import parse_deepspeed
from gpucluster.check.jobs.k8s import parse_k8s
from gpucluster.check.jobs.model import Command, JobFile, K8sWorkload, Problem, Setting
from gpucluster.check.jobs.nccl_env import looks_like_env, parse_env
from gpucluster.check.jobs.shell import parse_shell
from gpucluster.specs.loader import read_text

__all__ = ["Command", "JobFile", "K8sWorkload", "Problem", "Setting", "parse_job", "parse_text"]


def parse_text(path: str, text: str) -> JobFile:
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return parse_deepspeed(path, text)
    if suffix in (".yaml", ".yml"):
        return parse_k8s(path, text)
    if suffix == ".env" or (looks_like_env(text) and "#SBATCH" not in text):
        return parse_env(path, text)
    return parse_shell(path, text)


def parse_job(path: str) -> JobFile:
    return parse_text(path, read_text(path))
