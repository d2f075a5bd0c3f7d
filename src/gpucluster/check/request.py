"""`gpucluster check` as a function: read a cluster spec and job files, run the rules, return
the findings (the CLI parses its flags, calls `check`, and renders what it returns).

    import gpucluster
    report = gpucluster.check("examples/h200-256-100gbe.yaml", jobs=["examples/jobs/seed-train-70b.sbatch"])
    [(f.severity, f.rule, f.title) for f in report.findings], report.exit_code
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucluster.api_args import CHECK, checked
from gpucluster.errors import UserError

if TYPE_CHECKING:
    from gpucluster.check.findings import Finding
    from gpucluster.documents.check import CheckDocument


@dataclass
class CheckReport:
    """The findings, most severe first as the rules rank them, with what they were judged on."""
    context: Any                 # check/context.py CheckContext: the spec, the jobs, the model
    findings: list[Finding]
    counts: dict[str, int]       # severity -> findings
    fail_on: str
    exit_code: int               # 1 when a finding reaches fail_on, else 0

    def document(self) -> CheckDocument:
        """The gpucluster-check/v1 document (what `--json` prints)."""
        from gpucluster.documents.check import CheckDocument
        return CheckDocument.model_validate(self.to_json())

    def to_json(self) -> dict[str, Any]:
        ctx = self.context
        return {"schema": "gpucluster-check/v1", "cluster": ctx.spec.name, "jobs": [j.path for j in ctx.jobs],
                "model": ctx.model_note, "job_nodes": ctx.job_nodes,
                "job_nodes_note": ctx.job_nodes_note, "findings": [f.to_json() for f in self.findings],
                "counts": self.counts, "fail_on": self.fail_on, "exit_code": self.exit_code}


@checked(CHECK)
def check(cluster: str, *, jobs: list[str] | None = None, model: str | None = None, profile: str = "llama3",
          pool: str | None = None, interfaces: list[str] | str | None = None,
          input_gbps_per_gpu: float | None = None, checkpoint_interval: str | float | None = None,
          checkpoint_tier: str | None = None, rules: list[str] | None = None, fail_on: str = "error") -> CheckReport:
    """Run every rule (or `rules`) on a cluster spec and job files (sbatch, DeepSpeed JSON,
    torchrun command line, Kubernetes YAML, NCCL env). `checkpoint_interval`: '30m' or seconds.
    Bad input raises `UserError` naming the field."""
    from gpucluster.check.engine import build_context, exit_code, run_checks
    from gpucluster.check.findings import SEVERITIES
    from gpucluster.plan.reliability_plan import load_failure_model
    from gpucluster.specs.durations import parse_duration

    if fail_on not in SEVERITIES:
        raise UserError(f"must be one of {', '.join(SEVERITIES)}, got {fail_on!r}", field="--fail-on")
    if input_gbps_per_gpu is not None and input_gbps_per_gpu < 0:
        raise UserError(f"must be >= 0, got {input_gbps_per_gpu}", field="--input-gbps-per-gpu")
    try:
        interval_s = (parse_duration(checkpoint_interval, "m") if isinstance(checkpoint_interval, str)
                      else checkpoint_interval) if checkpoint_interval else None
    except ValueError as exc:
        raise UserError(str(exc), field="--checkpoint-interval") from None
    if interval_s is not None and not (isinstance(interval_s, (int, float)) and 0 < interval_s <= 10 * 365 * 86400):
        raise UserError(f"must be more than 0 and at most 10 years, got {str(checkpoint_interval)[:60]!r}",
                        field="--checkpoint-interval")
    if isinstance(interfaces, str):
        interfaces = [n.strip() for n in interfaces.split(",") if n.strip()] if interfaces else None
    ctx = build_context(cluster, jobs, model, profile=profile, pool_name=pool, interfaces=interfaces,
                        input_gbps_per_gpu=input_gbps_per_gpu, checkpoint_interval_s=interval_s,
                        checkpoint_tier=checkpoint_tier)
    if pool:
        ctx.spec.pool(pool)
    load_failure_model(profile)
    findings = run_checks(ctx, rules)
    code = exit_code(findings, fail_on)
    counts: dict[str, int] = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    return CheckReport(ctx, findings, counts, fail_on, code)
