"""`gpucluster check`: the cluster doctor. Reads a cluster spec and job files, runs every rule,
prints findings with their numbers and fixes. Exit 0 clean, 1 when a finding reaches
--fail-on, 2 on bad input."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, NodesOpt, SwitchOpt
from gpucluster.cli.render import console, print_json, safe

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def check(
    cluster: Annotated[Optional[str], typer.Argument(help="Cluster spec YAML (or --gpu, --nodes, --nic)")] = None,
    gpu: GpuOpt = None,
    nodes: NodesOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    job: Annotated[Optional[list[str]], typer.Option(help="Job file: sbatch script, DeepSpeed JSON, torchrun "
                                                          "command line, Kubernetes YAML or NCCL env file")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model the jobs train (default llama3-70b, the seeds' 70B)")] = None,
    profile: Annotated[str, typer.Option(help="Failure data: llama3, opt-175b, bloom-176b, seed")] = "llama3",
    pool: Annotated[Optional[str], typer.Option(help="Node pool the jobs run on (default: the first)")] = None,
    interfaces: Annotated[Optional[str], typer.Option(help="Network interfaces a node has, e.g. ib0,ib1,eth0")] = None,
    input_gbps_per_gpu: Annotated[Optional[float], typer.Option(
        help="Training input GB/s per GPU (images, video); a finite number >= 0")] = None,
    checkpoint_interval: Annotated[Optional[str], typer.Option(help="Your checkpoint interval, e.g. 30m")] = None,
    checkpoint_tier: Annotated[Optional[str], typer.Option(help="Storage tier checkpoints go to (default: the best)")] = None,
    rule: Annotated[Optional[list[str]], typer.Option(help="Run only these rules (repeat)")] = None,
    fail_on: Annotated[str, typer.Option(help="Exit 1 when a finding is at least: error, warning or info")] = "error",
    list_rules: Annotated[bool, typer.Option("--list-rules", help="List the rules and exit")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Find what is wrong with a cluster spec and its job files, with the numbers and the fix."""
    from gpucluster.check.request import check as run_check
    from gpucluster.check.rules import RULES
    from gpucluster.cli.cluster_options import finite_in, path_of, resolve

    if list_rules:
        rows = [{"id": n, "summary": r.summary} for n, r in sorted(RULES.items())]
        if json_out:
            print_json(rows)
        else:
            for r in rows:
                console.print(safe(f"{r['id']:24} {r['summary']}"))
        return
    finite_in(input_gbps_per_gpu, "--input-gbps-per-gpu", 0.0)
    choice = resolve(cluster, gpu, nodes, nic, nics_per_node, switch)
    path = path_of(choice)
    report = run_check(path, jobs=job, model=model, profile=profile, pool=pool, interfaces=interfaces,
                       input_gbps_per_gpu=input_gbps_per_gpu, checkpoint_interval=checkpoint_interval,
                       checkpoint_tier=checkpoint_tier, rules=rule, fail_on=fail_on)
    if choice.path is None:   # a finding points at the options, not at the file written for the rules
        from dataclasses import replace
        report.findings[:] = [replace(f, where=f"options {choice.source}") if f.where and f.where.startswith(path)
                              else f for f in report.findings]
    ctx, findings, counts, code = report.context, report.findings, report.counts, report.exit_code
    data = report.to_json()
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("check", data))
    else:
        _render(ctx, findings, counts, fail_on, code)
    if html:
        from gpucluster.report.ops_report import write_check_report
        write_check_report(report.document(), html)
    raise typer.Exit(code)


def _render(ctx, findings, counts, fail_on: str, code: int) -> None:
    # Names, paths, titles and evidence quote the spec and the job files: all through safe().
    jobs = ", ".join(j.path for j in ctx.jobs) or "none"
    console.print(f"[bold]{safe(ctx.spec.name)}[/bold]: {ctx.spec.total_gpus} GPUs; jobs: {safe(jobs)}; model "
                  f"{safe(ctx.model_note)}; job on {ctx.job_nodes} node(s) of pool {safe(ctx.pool.name)}"
                  + (f" [yellow]({safe(ctx.job_nodes_note)})[/yellow]" if ctx.job_nodes_note else ""))
    for f in findings:
        console.print(f"\n[{STYLE[f.severity]}]{f.severity.upper():7}[/] [bold]{safe(f.rule)}[/bold]  "
                      f"[dim]{safe(f.where or '')}[/dim]")
        console.print(f"  {safe(f.title)}")
        if f.evidence:
            ev = ", ".join(f"{k} {v}" for k, v in f.evidence.items())
            console.print(f"  [dim]evidence: {safe(ev)}[/dim]")
        console.print(f"  fix: {safe(f.fix)}")
    summary = ", ".join(f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'info' else ''}"
                        for s in ("error", "warning", "info"))
    verdict = "clean" if not findings else summary
    console.print(f"\n{verdict} -> exit {code} (--fail-on {fail_on})")
