"""Terminal rendering of simulation summaries (one run, or policies side by side)."""

from __future__ import annotations

from typing import Any

from gpucluster.cli.render import console, num, safe
from gpucluster.units import format_duration

BLOCKS = " ▁▂▃▄▅▆▇█"


def pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def dur(x: float | None) -> str:
    return "-" if x is None else format_duration(x)


def sparkline(values: list[float], width: int = 60) -> str:
    if not values:
        return ""
    step = max(1, len(values) // width)
    pts = [sum(values[i:i + step]) / len(values[i:i + step]) for i in range(0, len(values), step)]
    return "".join(BLOCKS[min(8, max(0, round(v * 8)))] for v in pts)


def progress_of(sim: Any, t: float) -> tuple[float, str]:
    """How far a run is (0-1) and what to show beside the bar. With a horizon: simulated time
    over it. Without: jobs ended over jobs to run (the end time is not known in advance; a
    guess from the last arrival stalls when the queue drains slowly, as under time-sharing)."""
    day = f"day {t / 86400:,.1f}"
    horizon = sim.cfg.horizon_s
    if horizon:
        return min(1.0, t / horizon), day
    total = max(len(sim.jobs), len(sim.by_id))
    if not total:
        return 0.0, day
    return min(1.0, sim.finished / total), f"{day}, {sim.finished:,} of {total:,} jobs ended"


def render_summary(s: dict[str, Any]) -> None:
    from rich.table import Table

    c = console
    # Scenario, class, service and trace names come from the scenario file and the traces: safe().
    head = (f"[bold]{safe(s['scenario'])}[/bold]: policy {safe(s['policy'])}, seed {s['seed']}, "
            f"{s['simulated_days']:.1f} simulated days")
    if s["partial"]:
        head += " [bold red](PARTIAL: stopped early)[/bold red]"
    c.print(head)
    cl = s["cluster"]
    types = safe(", ".join(f"{n} x {t}" for t, n in cl["types"].items()))
    burst = f", up to {cl['cloud_gpus_max']:,} more rented in the cloud" if cl.get("cloud_gpus_max") else ""
    c.print(f"Cluster: {cl['gpus']:,} GPUs on {cl['nodes']:,} nodes ({types}){burst}")
    j = s["jobs"]
    c.print(f"Jobs: {j['total']:,}: {j['completed']:,} completed, {j['failed']:,} failed, "
            f"{j['cancelled']:,} cancelled, {j['running']:,} still running, {j['pending']:,} still pending")
    for why, n in j["not_run"].items():
        c.print(f"  [yellow]{n:,} not run: {safe(why)}[/yellow]")
    u = s["utilization"]
    c.print(f"Utilization: allocation {pct(u['allocation'])}, busy {pct(u['busy'])} of "
            f"{num(u['capacity_gpu_hours'], 0)} GPU-hours (idle {num(u['idle_gpu_hours'], 0)}, "
            f"down {num(u['down_gpu_hours'], 0)})")
    if u.get("cloud_capacity_gpu_hours"):
        c.print(f"  on-prem allocation {pct(u['on_prem_allocation'])}; cloud nodes up "
                f"{num(u['cloud_capacity_gpu_hours'], 0)} GPU-hours, "
                f"{pct(u['cloud_allocated_gpu_hours'] / u['cloud_capacity_gpu_hours'])} of them allocated")
    g = s["gpu_hours"]
    c.print(f"Goodput: {pct(s['goodput'])} of allocated GPU-hours did useful work (checkpoints "
            f"{num(g['checkpoint'], 0)}, restarts after failures {num(g['restart'], 0)}, restarts after "
            f"preemptions and moves {num(g.get('restart_preemption', 0.0), 0)}, lost to failures "
            f"{num(g['lost_failures'], 0)}, lost to preemption {num(g['lost_preemption'], 0)} GPU-h)")
    f = s.get("failures")
    if f:
        seen = f"one every {f['cluster_mtbf_hours']:.1f} h" if f["cluster_mtbf_hours"] else "none"
        c.print(f"Failures: {f['count']:,}, {f['hardware']:,} of them hardware ({seen}; expected one every "
                f"{f['expected_cluster_mtbf_hours']:.1f} h, {f['per_gpu_hour']:.3g} per GPU-hour, "
                f"{safe(f['distribution'])}); {f['jobs_interrupted']:,} job interruptions")
        if f.get("by_component"):
            c.print("  by component: " + safe(", ".join(f"{k} {v}" for k, v in f["by_component"].items())))
        c.print(f"  rate: {safe(f['source'])}")
        c.print(f"  repair: {f['repair_hours_default']:g} h after a hardware failure unless the scenario says "
                f"(reliability data node_repair_h: {safe(f['repair_source'].split(':')[0])})")
    fr = s["fragmentation"]
    if fr.get("mean_gpus") is not None:
        c.print(f"Fragmentation: {fr['mean_gpus']:.1f} GPUs free but unusable by any waiting job on average "
                f"({pct(fr['mean_ratio'])}; {pct(fr['mean_ratio_while_waiting'])} while jobs wait)")
    cost = s["cost"]
    if cost.get("total_usd") is not None:
        cloud = f" + ${cost['cloud_usd']:,.0f} cloud ({num(cost.get('cloud_gpu_hours'), 0)} GPU-h)" \
            if cost.get("cloud_gpu_hours") else ""
        per = cost.get("usd_per_useful_gpu_hour")
        c.print(f"Cost: ${cost['on_prem_usd']:,.0f} on-prem{cloud} = ${cost['total_usd']:,.0f}"
                + (f", ${per:.2f} per useful GPU-hour" if per else ""))
    if s["makespan_s"] is not None:
        c.print(f"Makespan: {dur(s['makespan_s'])}")
    # Two tables: eighteen columns in one squeeze the class names out of an 80-column terminal.
    t = Table(title="Per job class (wait: submit to first start; queued: all time waiting, preempted spells "
                    "included)", title_justify="left")
    for col in ("class", "kind", "jobs", "done", "failed", "left", "wait mean", "wait p50", "wait p99",
                "queued mean", "queued p99"):
        t.add_column(col, justify="left" if col in ("class", "kind") else "right")
    t2 = Table(title="Per job class: completion time and GPU time", title_justify="left")
    # "restarts" alone read 0 under time-sharing, where every preempted job reloads: name the cause
    for col in ("class", "JCT mean", "JCT p50", "JCT p99", "GPU-h", "failure restarts", "preemptions",
                "restart GPU-h failures / moves"):
        t2.add_column(col, justify="left" if col == "class" else "right")
    for name, k in s["classes"].items():
        q = k.get("queued_s") or {}
        t.add_row(safe(name), safe(k["kind"]), f"{k['jobs']:,}", f"{k['completed']:,}", f"{k['failed'] + k['cancelled']:,}",
                  f"{k['running'] + k['pending']:,}", dur(k["wait_s"]["mean"]), dur(k["wait_s"]["p50"]),
                  dur(k["wait_s"]["p99"]), dur(q.get("mean")), dur(q.get("p99")))
        t2.add_row(safe(name), dur(k["jct_s"]["mean"]), dur(k["jct_s"]["p50"]), dur(k["jct_s"]["p99"]),
                   num(k["gpu_hours"], 0), f"{k['restarts']:,}", f"{k['preemptions']:,}",
                   f"{num(k.get('restart_gpu_hours'), 0)} / {num(k.get('restart_preemption_gpu_hours'), 0)}")
    c.print(t)
    c.print(t2)
    _render_recorded_waits(s)
    for name, sv in (s.get("services") or {}).items():
        c.print(f"Service {safe(name)}: {num(sv['requests'], 0)} requests, {pct(sv['slo_miss_ratio'], 2)} over capacity "
                f"(SLO misses), under-provisioned {pct(sv['under_provisioned_ratio'])} of the time, peak "
                f"{sv['peak_replicas']} replicas, mean load {pct(sv['mean_load'])}")
    ts = s.get("timeseries") or {}
    if ts.get("allocation"):
        c.print(f"Allocation over time  |{sparkline(ts['allocation'])}|")
        c.print(f"Busy over time        |{sparkline(ts['busy'])}|")
    for tr in s.get("traces") or []:
        bad = f", {tr['bad_rows']:,} bad rows skipped" if tr["bad_rows"] else ""
        first = "; ".join(f"{why}: {v['rows']} (first at line {v['first_line']})" for why, v in tr["bad"].items())
        skipped = ", ".join(f"{n:,} {why}" for why, n in (tr.get("skipped") or {}).items())
        c.print(f"Trace {safe(tr['path'])}: {tr['rows']:,} rows, {tr['jobs']:,} jobs{bad}"
                + (f" ({safe(first)})" if first else "") + (f"; not replayed: {safe(skipped)}" if skipped else ""))
    for w in s.get("warnings") or []:
        c.print(f"[yellow]Warning ({safe(w['code'])}, {safe(w['field'])}): {safe(w['message'])}[/yellow]")
    for note in s.get("notes") or []:
        c.print(f"Note: {safe(note)}")
    rate = s.get("events_per_s")
    c.print(f"[dim]{s['events']:,} events in {s['wall_s']:.2f} s" + (f" ({rate:,.0f} events/s)" if rate else "")
            + "[/dim]")


def _render_recorded_waits(s: dict[str, Any]) -> None:
    """A replayed Slurm history: simulated against recorded waits per partition (calibration)."""
    from rich.table import Table

    from gpucluster.sim.calibration import COLUMNS, comparison_rows

    rows = comparison_rows(s, dur)
    if not rows:
        return
    t = Table(title="Waits, simulated vs recorded (sacct Start - Eligible), jobs started in both",
              title_justify="left")
    for col in COLUMNS:
        t.add_column(col, justify="left" if col == "partition" else "right")
    for r in rows:
        t.add_row(safe(r[0]), *r[1:])
    console.print(t)


ROWS = [
    ("allocation", lambda s: pct(s["utilization"]["allocation"])),
    ("busy", lambda s: pct(s["utilization"]["busy"])),
    ("goodput", lambda s: pct(s["goodput"])),
    ("jobs completed", lambda s: f"{s['jobs']['completed']:,}"),
    ("still pending", lambda s: f"{s['jobs']['pending']:,}"),
    ("mean wait to first start", lambda s: dur(_mean(s, "wait_s"))),
    ("p99 wait to first start (worst class)", lambda s: dur(_worst(s, "wait_s", "p99"))),
    ("mean time queued (preempted spells too)", lambda s: dur(_mean(s, "queued_s"))),
    ("mean JCT", lambda s: dur(_mean(s, "jct_s"))),
    ("makespan", lambda s: dur(s["makespan_s"])),
    ("fragmentation", lambda s: pct(s["fragmentation"].get("mean_ratio"))),
    ("lost to failures GPU-h", lambda s: num(s["gpu_hours"]["lost_failures"], 0)),
    ("lost to preemption GPU-h", lambda s: num(s["gpu_hours"]["lost_preemption"], 0)),
    ("restarts after failures GPU-h", lambda s: num(s["gpu_hours"]["restart"], 0)),
    ("restarts after preemptions, moves GPU-h", lambda s: num(s["gpu_hours"].get("restart_preemption"), 0)),
    ("checkpoint writes GPU-h", lambda s: num(s["gpu_hours"]["checkpoint"], 0)),
    ("SLO misses", lambda s: pct(_slo(s), 2) if s.get("services") else "-"),
    ("work done (ref. GPU-h)", lambda s: num(s.get("work_reference_gpu_hours"), 0)),
    ("$ per GPU-h of work", lambda s: num(s["cost"].get("usd_per_work_gpu_hour"), 2)),
]


def _mean(s: dict, key: str) -> float | None:
    tot = n = 0.0
    for k in s["classes"].values():
        if k["kind"] == "replica" or (k.get(key) or {}).get("mean") is None:
            continue
        w = k["completed"] if key == "jct_s" else k["jobs"]
        tot += k[key]["mean"] * w
        n += w
    return tot / n if n else None


def _worst(s: dict, key: str, q: str) -> float | None:
    vals = [k[key][q] for k in s["classes"].values() if k["kind"] != "replica" and k[key][q] is not None]
    return max(vals) if vals else None


def _slo(s: dict) -> float:
    sv = s["services"].values()
    req = sum(v["requests"] for v in sv)
    return sum(v["requests"] - v["served"] for v in sv) / req if req else 0.0


def render_compare(results: dict[str, dict[str, Any]]) -> None:
    from rich.table import Table

    first = next(iter(results.values()))
    title = f"{safe(first['scenario'])}: {first['simulated_days']:.1f} simulated days, seed {first['seed']}"
    if any(r["partial"] for r in results.values()):
        title += " (PARTIAL: stopped early)"
    t = Table(title=title, title_justify="left")
    t.add_column("")
    for name in results:
        t.add_column(safe(name), justify="right")
    for label, fn in ROWS:
        t.add_row(label, *(fn(s) for s in results.values()))
    if any(s.get("recorded_waits") for s in results.values()):   # a replayed Slurm history
        for q in ("p50", "p90"):
            t.add_row(f"wait {q}, all partitions: simulated (recorded)",
                      *(_vs_recorded(s, q) for s in results.values()))
    console.print(t)
    # what every run rests on (the planner's run times per GPU type, trace readers): once, not per policy
    shared = [n for n in first.get("notes") or [] if all(n in (r.get("notes") or []) for r in results.values())]
    for note in shared:
        console.print(f"Note: {safe(note)}")


def _vs_recorded(s: dict, q: str) -> str:
    a = (s.get("recorded_waits") or {}).get("all")
    return "-" if not a else f"{dur(a['simulated_s'][q])} ({dur(a['recorded_s'][q])})"
