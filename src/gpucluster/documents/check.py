"""`gpucluster check --json`: schema gpucluster-check/v1, the cluster doctor's findings."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Strict

SCHEMA: Final = "gpucluster-check/v1"
Severity = Literal["info", "warning", "error"]


class Finding(Strict):
    rule: str
    severity: Severity
    title: str
    where: str | None
    evidence: dict[str, Any] = Field(description="the numbers the finding rests on, by name")
    fix: str


class CheckDocument(Document):
    schema_: Literal["gpucluster-check/v1"] = Field(SCHEMA, alias="schema")
    cluster: str
    jobs: list[str]
    model: str
    job_nodes: int
    job_nodes_note: str | None = Field(None, description="why job_nodes is not the job's own count (an impossible "
                                       "#SBATCH --nodes, more nodes than the pool), else null")
    findings: list[Finding]
    counts: dict[Severity, int]
    fail_on: Severity
    exit_code: int
