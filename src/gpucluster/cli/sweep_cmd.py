"""`gpucluster sweep SWEEP.yaml`: many plans or simulations in parallel (local processes or Ray)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def sweep(
    spec: Annotated[str, typer.Argument(help="Sweep YAML: command, base options, grid, fields to keep")],
    ray: Annotated[Optional[str], typer.Option(help="Ray cluster address, or auto to start a local Ray")] = None,
    workers: Annotated[Optional[int], typer.Option(help="Local processes at once (default: CPU count)")] = None,
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Write the JSON results here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Run every combination of the grid; a failed task is reported with its parameters and the
    rest complete (exit 1 when any failed)."""
    import json

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from gpucluster.cli.render import console, err_console, print_json
    from gpucluster.cli.render import safe as escape   # sweep names, parameters and errors: markup and controls
    from gpucluster.engines.sweep import sweep as run

    from gpucluster.output_file import check_output_path, write_output

    for flag, path in (("--out", out), ("--html", html)):
        if path:   # the one-line reason before any task runs (a folder, a 300-character name, a FIFO)
            check_output_path(path, flag)
    if workers is not None:
        from gpucluster.api_args import count_option
        count_option(workers, "--workers", 1, 1024)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True, disable=json_out) as bar:
        tid = bar.add_task("sweep", total=None)
        result = run(spec, ray_address=ray, workers=workers,
                     progress=lambda done, total: bar.update(tid, completed=done, total=total))
    if out:
        # A missing folder, a folder path or a read-only folder is one line (exit 2), not a traceback;
        # the file appears whole or not at all.
        write_output(out, json.dumps(result, indent=2), field="--out")
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("sweep", result))
    else:
        console.print(f"[bold]{escape(result['name'])}[/bold]: {len(result['tasks'])} tasks on {result['engine']}"
                      + (f" ({result['ray_nodes']} node(s))" if result["ray_nodes"] else "")
                      + f": {result['ok']} ok, {result['failed']} failed")
        for t in result["tasks"]:
            params = ", ".join(f"{k}={v}" for k, v in t["params"].items())
            if t["ok"]:
                shown = ", ".join(f"{k}={_fmt(v)}" for k, v in t["result"].items()) if len(t["result"]) <= 6 else "ok"
                console.print(f"  [green]ok[/]     {escape(params)}: {escape(shown)}")
                for flag in t.get("flags", []):
                    console.print(f"         [bold yellow]flag[/]: {escape(flag)}")
            else:
                console.print(f"  [red]FAILED[/] {escape(params)}: {escape(t['error'])}")
    if html:
        from gpucluster.report.ops_report import write_sweep_report
        from gpucluster.documents import parse
        write_sweep_report(parse("sweep", result), html)
    if result["failed"]:
        raise typer.Exit(1)


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
