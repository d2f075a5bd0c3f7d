"""Run the rules over a cluster spec and job files; findings sorted worst first; exit code."""

from __future__ import annotations

from gpucluster.check.context import DEFAULT_MODEL, CheckContext
from gpucluster.check.findings import RANK, Finding, Severity
from gpucluster.check.jobs import parse_job
from gpucluster.check.rules import RULES


def build_context(cluster: str, jobs: list[str] | None = None, model: str | None = None, **options) -> CheckContext:
    """Load the spec (bad spec: UserError), parse the job files (unparseable: problems), load the model."""
    from gpucluster.specs.cluster import load_cluster
    from gpucluster.specs.loader import load_yaml
    from gpucluster.specs.workload import load_model_spec

    spec = load_cluster(cluster)
    _, lines = load_yaml(cluster)
    parsed = [parse_job(j) for j in jobs or []]
    return CheckContext(spec, cluster, lines, parsed, load_model_spec(model or DEFAULT_MODEL),
                        model_given=model is not None, **options)


def run_checks(ctx: CheckContext, only: list[str] | None = None) -> list[Finding]:
    names = [RULES.canonical(n, field="--rule") for n in only] if only else RULES.names()
    findings: list[Finding] = []
    for name in names:
        findings.extend(RULES.get(name)().check(ctx))
    return sorted(findings, key=lambda f: (-RANK[f.severity], f.rule, f.where or ""))


def exit_code(findings: list[Finding], fail_on: Severity = "error") -> int:
    """0 when no finding reaches `fail_on`, 1 otherwise (2, bad input, is raised before)."""
    return 1 if any(f.reaches(fail_on) for f in findings) else 0
