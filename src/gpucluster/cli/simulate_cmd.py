"""`gpucluster simulate`: run a scenario through the cluster simulator, or compare policies."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup


# Set by Ctrl-C during a run: the command prints the partial result, then exits 130 (as `plan` does).
INTERRUPTED: list[bool] = []


def _exit_if_interrupted() -> None:
    if INTERRUPTED:
        INTERRUPTED.clear()
        import sys
        print("interrupted: the result above is partial", file=sys.stderr)
        raise typer.Exit(130)


class _RunByDefault(TyperGroup):
    """`gpucluster simulate SCENARIO ...` means `gpucluster simulate run SCENARIO ...`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


simulate_app = typer.Typer(
    cls=_RunByDefault, no_args_is_help=True,
    help="Simulate a shared GPU cluster over days or months: queues, utilisation, failures, policies. "
         "`gpucluster simulate SCENARIO.yaml` runs one scenario; `compare` runs several policies.")

Scenario = Annotated[str, typer.Argument(help="Scenario YAML (see examples/scenarios/)", show_default=False)]
Seed = Annotated[int | None, typer.Option(help="Random seed (default: the scenario's)")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON")]


@simulate_app.command("run")
def run(
    scenario: Scenario,
    policy: Annotated[str | None, typer.Option(help="Scheduling policy (default: the scenario's); "
                                                       "`gpucluster simulate policies` lists them")] = None,
    seed: Seed = None,
    json_out: JsonOut = False,
    events: Annotated[str | None, typer.Option(help="Write every event as JSON lines to this file")] = None,
    html: Annotated[str | None, typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Run one scenario and print utilisation, queueing, completion, failures and cost."""
    from gpucluster.cli.render import print_json
    from gpucluster.cli.simulate_render import render_summary
    from gpucluster.specs.scenario import load_scenario

    INTERRUPTED.clear()
    if html:
        from gpucluster.output_file import check_output_path
        check_output_path(html, "--html")
    loaded = load_scenario(scenario)
    jobs: dict[str, list] = {}
    summary = _run(loaded, policy, seed, events, f"{loaded.spec.name}", jobs)
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("simulation", summary))
    else:
        render_summary(summary)
    if html:
        from gpucluster.report.ops_report import completion_times, write_simulate_report
        write_simulate_report({summary["policy"]: summary}, {p: completion_times(js) for p, js in jobs.items()}, html)
    _exit_if_interrupted()


@simulate_app.command("compare")
def compare(
    scenario: Scenario,
    policies: Annotated[str, typer.Option(help="Comma-separated policies, e.g. fifo,backfill,sjf")],
    seed: Seed = None,
    json_out: JsonOut = False,
    html: Annotated[str | None, typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Run the same scenario (same jobs, same failures) under several policies, side by side."""
    from gpucluster.cli.render import print_json
    from gpucluster.cli.simulate_render import render_compare
    from gpucluster.errors import UserError
    from gpucluster.sim.policies import load_all
    from gpucluster.specs.scenario import load_scenario

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise UserError("give at least one policy, e.g. --policies fifo,backfill", field="--policies")
    registry = load_all()
    names = [registry.canonical(n, field="--policies") for n in names]
    INTERRUPTED.clear()
    if html:
        from gpucluster.output_file import check_output_path
        check_output_path(html, "--html")
    loaded = load_scenario(scenario)
    results: dict[str, Any] = {}
    jobs: dict[str, list] = {}
    for name in dict.fromkeys(names):
        results[name] = _run(loaded, name, seed, None, f"{loaded.spec.name} [{name}]", jobs)
        if results[name]["partial"]:
            break
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("simulation-compare", {"schema": "gpucluster-simulation-compare/v1", "scenario": loaded.spec.name,
                                               "partial": any(r["partial"] for r in results.values()),
                                               "policies": results}))
    else:
        render_compare(results)
    if html:
        from gpucluster.report.ops_report import completion_times, write_simulate_report
        write_simulate_report(results, {p: completion_times(js) for p, js in jobs.items()}, html)
    _exit_if_interrupted()


@simulate_app.command("policies")
def list_policies(json_out: JsonOut = False) -> None:
    """List the scheduling policies and their options."""
    from gpucluster.cli.render import console, print_json, safe
    from gpucluster.sim.policies import load_all

    reg = load_all()
    if json_out:
        print_json({name: {"summary": cls.summary, "options": cls.options_doc} for name, cls in reg.items()})
        return
    for name, cls in reg.items():
        console.print(f"[bold]{safe(f'{name:12}')}[/bold] {safe(cls.summary)}")
        for opt, doc in cls.options_doc.items():
            console.print(f"{'':14}option {safe(opt)}: {safe(doc)}")


def _run(loaded, policy: str | None, seed: int | None, events: str | None, label: str,
         jobs: dict[str, list] | None = None) -> dict[str, Any]:
    """One run with a progress bar (after a second) and Ctrl-C that stops cleanly (results marked partial)."""
    import signal
    import time

    from gpucluster.cli.simulate_render import progress_of
    from gpucluster.sim.request import simulate

    holder: dict[str, Any] = {}
    progress: dict[str, Any] = {"bar": None, "t0": time.perf_counter()}
    log_file = None
    log = None
    if events:
        import json

        from gpucluster.output_file import StreamOutput
        # A temporary file renamed over --events when the run ends (partial or not): a device, a
        # FIFO, /dev/full or a loop of links is one line before the run, a full disk one line
        # during it, and an interrupted start leaves no 0-byte file.
        log_file = StreamOutput(events, field="--events")

        def log(rec: dict) -> None:
            log_file.write(json.dumps(rec) + "\n")

    def on_progress(t: float) -> None:
        sim = holder.get("sim")
        if sim is None:
            return
        bar = progress["bar"]
        if bar is None:
            if time.perf_counter() - progress["t0"] < 1.0:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            from gpucluster.cli.render import err_console, safe
            bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                           TextColumn("{task.fields[where]}"), TimeElapsedColumn(),
                           console=err_console, transient=True)
            bar.start()
            progress["bar"] = bar
            progress["task"] = bar.add_task(safe(label), total=1.0, where="")   # label: scenario name
        done, where = progress_of(sim, t)
        bar.update(progress["task"], completed=done, where=where)

    def on_sigint(signum, frame) -> None:
        sim = holder.get("sim")
        if sim is None:
            raise KeyboardInterrupt
        sim.kernel.stop_requested = True
        INTERRUPTED.append(True)

    old = signal.signal(signal.SIGINT, on_sigint)
    committed = False
    try:
        result = simulate(loaded, policy=policy, seed=seed, events=log, on_progress=on_progress,
                          on_start=lambda s: holder.__setitem__("sim", s), policy_field="--policy")
        if log_file is not None:
            log_file.commit()       # the events up to the stop, when stopped: the summary says partial
        committed = True
    finally:
        signal.signal(signal.SIGINT, old)
        if progress["bar"] is not None:
            progress["bar"].stop()
        if log_file is not None and not committed:
            log_file.discard()
    if jobs is not None:
        jobs[result.summary["policy"]] = result.jobs
    return result.summary
