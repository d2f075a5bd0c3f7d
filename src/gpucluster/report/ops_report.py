"""HTML reports of cost, reliability, simulate (and compare), check, comm and sweep.

Cost, reliability, check, comm and sweep read their `--json` document as its typed model
(gpucluster.documents); the simulation summary is still read as a dict, as the simulator grows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucluster.report.html import Report, Table, write_report
from gpucluster.units import format_duration

if TYPE_CHECKING:
    from gpucluster.documents.check import CheckDocument
    from gpucluster.documents.comm import CommDocument
    from gpucluster.documents.cost import CostDocument
    from gpucluster.documents.reliability import ReliabilityDocument
    from gpucluster.documents.sweep import SweepDocument


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x / 1e6:,.2f}M" if abs(x) >= 1e6 else f"${x:,.0f}"


# -- cost ---------------------------------------------------------------------------------

def cost_report(plan: Any, out: CostDocument) -> Report:
    from gpucluster.model.cost import cumulative
    from gpucluster.report.figures_ops import build_vs_rent

    b = plan.build
    years = out.years
    be = {r.option: r.break_even_months for r in out.rent}
    finite = [m for m in be.values() if m is not None]
    months = int(min(120, max(12 * years, 1.25 * max(finite, default=0))))
    rows = {r.name: cumulative(b.capex_usd, b.opex_usd_per_year, r.usd_per_year(b.gpus), months) for r in plan.rent}
    first = next(iter(rows.values()))
    fig = build_vs_rent([m for m, _, _ in first], [bv for _, bv, _ in first],
                        {name: [rv for _, _, rv in r] for name, r in rows.items()}, be)
    facts = [("cluster", f"{out.cluster} ({b.gpus:,} GPUs, {out.it_kw:,.0f} kW IT)"),
             ("capital", _usd(b.capex_usd)), ("operating per year", _usd(b.opex_usd_per_year)),
             (f"{years:g}-year TCO, build", _usd(out.tco_usd)),
             ("build, per GPU-hour used", f"${out.build_usd_per_gpu_hour_used:.2f} at {out.utilization:.0%} use")]
    for r in out.rent:
        facts.append((f"rent {r.option}, {years:g} years",
                      f"{_usd(r.tco_usd)} (${r.usd_per_gpu_hour:.2f}/GPU-h); break-even "
                      + ("never" if r.break_even_months is None else f"month {r.break_even_months:.0f}")))
    items = [[i.category, i.name, i.quantity, i.unit_usd, i.total_usd, i.origin] for i in b.capex] + \
            [[f"{i.category} (per year)", i.name, i.quantity, i.unit_usd, i.total_usd, i.origin] for i in b.opex_per_year]
    table = Table("Bill of materials and running costs", ["category", "item", "quantity", "unit $", "total $",
                                                          "price from"], items)
    concl = []
    od = next((r for r in out.rent if r.option == "on-demand"), out.rent[0])
    m = od.break_even_months
    concl.append(f"Owning pays off against {od.option} rental after {m:.0f} months" if m is not None
                 else f"Renting {od.option} stays cheaper than owning at {out.utilization:.0%} utilization")
    if out.training_run is not None:
        tr = out.training_run
        concl.append(f"One {tr.model} run: rent {_usd(tr.rent_usd)}, on the built cluster {_usd(tr.build_usd)}")
    return Report(title=f"Build or rent: {out.cluster}", subtitle=f"{years:g}-year view at "
                  f"{out.utilization:.0%} utilization", facts=facts, conclusions=concl, figures=[fig],
                  tables=[table], notes=list(out.assumptions))


def write_cost_report(plan: Any, out: CostDocument, path: str) -> None:
    write_report(cost_report(plan, out), path)


# -- reliability --------------------------------------------------------------------------

def reliability_report(fm: Any, out: ReliabilityDocument, plan: Any) -> Report:
    from gpucluster.report.figures_ops import checkpoint_timeline, goodput_vs_interval, mtbf_by_size

    figures = [mtbf_by_size([(r.gpus, r.mtbf_h) for r in out.mtbf_by_gpus], fm.profile,
                            [(c.nodes * 8, c.seed_mtbf_h) for c in out.seed_claims])]
    facts = [("failure profile", f"{fm.profile}: {fm.description}")]
    tables = [Table("Time between job interruptions by job size", ["GPUs", "nodes", "MTBF"],
                    [[r.gpus, r.nodes, format_duration(r.mtbf_h * 3600)] for r in out.mtbf_by_gpus])]
    concl, notes = [], []
    if plan is not None and out.job is not None:
        j = out.job
        best = plan.best
        mtbf = plan.mtbf_s
        facts += [("job", f"{j.model} on {j.gpus:,} GPUs ({j.nodes} nodes) of {j.cluster}"),
                  ("interruptions", f"{j.interruptions_per_day:.2f} a day, one every {format_duration(mtbf)}"),
                  ("checkpoint", f"{j.checkpoint_bytes / 1e12:.2f} TB"),
                  ("best", f"{best.option.name} every {format_duration(best.optimal.interval_s)}"),
                  ("goodput", f"{best.optimal.goodput:.2%}")]
        tiers = [{"name": o.option.name, "write_s": o.option.delta_s,
                  "restart_s": plan.restart_overhead_s + o.option.read_s + o.option.copy_s,
                  "optimal_s": o.optimal.interval_s, "goodput": o.optimal.goodput} for o in plan.options]
        given = next((o.given.interval_s for o in plan.options if o.given is not None), None)
        figures.append(goodput_vs_interval(tiers, mtbf, given))
        shown = best.chosen
        figures.append(checkpoint_timeline(mtbf_s=mtbf, interval_s=shown.interval_s, write_s=best.option.delta_s,
                                           restart_s=plan.restart_overhead_s + best.option.read_s,
                                           goodput=shown.goodput, tier=best.option.name))
        tables.append(Table("Checkpoint tiers", ["tier", "write", "read", "Young", "Daly", "lost per failure",
                                                 "goodput"],
                            [[r.tier, format_duration(r.write_s), format_duration(r.read_s),
                              format_duration(r.young_s), format_duration(r.daly_s),
                              format_duration(r.lost_work_per_failure_s), f"{r.goodput:.2%}"]
                             for r in j.options]))
        concl.append(f"Checkpoint to {best.option.name} every {format_duration(best.optimal.interval_s)}: goodput "
                     f"{best.optimal.goodput:.2%}; keep {j.spares.spare_nodes} spare node(s)")
        notes = list(j.assumptions)
    title = f"Failures and checkpoints: {out.job.cluster}" if plan is not None and out.job is not None else \
        f"Failures by job size: profile {fm.profile}"
    return Report(title=title, facts=facts, conclusions=concl, figures=figures, tables=tables, notes=notes)


def write_reliability_report(fm: Any, out: ReliabilityDocument, plan: Any, path: str) -> None:
    write_report(reliability_report(fm, out, plan), path)


# -- simulate -----------------------------------------------------------------------------

def completion_times(jobs: list) -> list[float]:
    from gpucluster.sim.jobs import COMPLETED
    return [j.end - j.submit for j in jobs if j.state == COMPLETED and j.kind != "replica"]


def jct_quantiles(values: list[float]) -> tuple[float, float] | None:
    """Median and p99 of completion times (s), as the summary's per-class stats compute them."""
    import numpy as np
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def simulate_report(summaries: dict[str, dict[str, Any]], jcts: dict[str, list[float]]) -> Report:
    """One run (one policy) or several policies on the same scenario. Every figure's caption
    quotes the numbers of the tables (the summaries, and the completion times `jcts`)."""
    from gpucluster.report.figures_ops import jct_distribution, sim_utilization

    first = next(iter(summaries.values()))
    means = {p: (s["utilization"]["allocation"], s["utilization"]["busy"]) for p, s in summaries.items()
             if s["utilization"]["allocation"] is not None}
    quant = {p: q for p, v in jcts.items() if (q := jct_quantiles(v)) is not None}
    figures = [sim_utilization({p: s.get("timeseries") or {} for p, s in summaries.items()}, means)]
    if any(jcts.values()):
        figures.append(jct_distribution(jcts, quant))
    cols = ["policy", "allocation", "busy", "goodput", "jobs completed", "failed", "pending", "JCT mean",
            "JCT p50", "JCT p99", "wait to first start, mean", "time queued, mean", "makespan",
            "restarts after failures GPU-h", "restarts after preemptions, moves GPU-h", "cost"]
    rows = []
    for p, s in summaries.items():
        u, j, g = s["utilization"], s["jobs"], s["gpu_hours"]
        v = jcts.get(p) or []
        q = quant.get(p)
        rows.append([p + (" (partial)" if s["partial"] else ""), _pct(u["allocation"]), _pct(u["busy"]),
                     _pct(s["goodput"]), j["completed"], j["failed"], j["pending"],
                     _dur(sum(v) / len(v) if v else None), _dur(q[0] if q else None), _dur(q[1] if q else None),
                     _dur(_class_mean(s, "wait_s")), _dur(_class_mean(s, "queued_s")),
                     "-" if s["makespan_s"] is None else format_duration(s["makespan_s"]),
                     f"{g['restart']:,.0f}", f"{g.get('restart_preemption', 0.0):,.0f}",
                     _usd(s["cost"].get("total_usd"))])
    classes = []
    for p, s in summaries.items():
        for name, c in s["classes"].items():
            queued = c.get("queued_s") or {}
            classes.append([p, name, c["jobs"], c["completed"], _dur(c["wait_s"]["p50"]), _dur(c["wait_s"]["p99"]),
                            _dur(queued.get("mean")), _dur(c["jct_s"]["p50"]), _dur(c["jct_s"]["p99"]), c["preemptions"],
                            f"{c.get('restart_gpu_hours', 0.0):,.0f}", f"{c.get('restart_preemption_gpu_hours', 0.0):,.0f}"])
    tables = [Table("Policies" if len(summaries) > 1 else "Summary", cols, rows),
              Table("Job classes (wait: submit to first start; queued: all time waiting, preempted spells included)",
                    ["policy", "class", "jobs", "completed", "wait p50", "wait p99", "queued mean", "JCT p50",
                     "JCT p99", "preemptions", "restart GPU-h, failures", "restart GPU-h, preemptions and moves"],
                    classes)]
    from gpucluster.sim.calibration import COLUMNS, comparison_rows
    waits = [[p, *r] for p, s in summaries.items() for r in comparison_rows(s, _dur)]
    if waits:   # a replayed Slurm history: simulated against recorded waits per partition
        tables.append(Table("Waits, simulated vs recorded (sacct Start - Eligible)", ["policy", *COLUMNS], waits))
    cl = first["cluster"]
    facts = [("scenario", first["scenario"]), ("cluster", f"{cl['gpus']:,} GPUs on {cl['nodes']:,} nodes"),
             ("simulated", f"{first['simulated_days']:.1f} days"), ("seed", str(first["seed"]))]
    if len(summaries) == 1:
        u = first["utilization"]
        facts += [("policy", first["policy"]), ("allocation", _pct(u["allocation"])), ("busy", _pct(u["busy"])),
                  ("goodput", _pct(first["goodput"]))]
        if first.get("failures"):
            f = first["failures"]
            facts.append(("failures", f"{f['count']:,} ({f['jobs_interrupted']:,} job interruptions)"))
    concl = conclusions(summaries, jcts)
    notes = [n for s in summaries.values() for n in s.get("notes", [])][:20]
    title = f"Simulation: {first['scenario']}" + (" (policies compared)" if len(summaries) > 1 else "")
    return Report(title=title, facts=facts, conclusions=concl, figures=figures, tables=tables,
                  notes=list(dict.fromkeys(notes)))


def conclusions(summaries: dict[str, dict[str, Any]], jcts: dict[str, list[float]]) -> list[str]:
    """What to conclude, ranked on what users wait for and pay for: completion time first (most
    jobs completed, then the lowest mean JCT), then goodput. Allocation is context, not a goal:
    a policy can keep GPUs allocated by restarting jobs it moves."""
    first = next(iter(summaries.values()))
    out: list[str] = []
    if len(summaries) == 1:
        g = first["gpu_hours"]
        lost = g["restart"] + g.get("restart_preemption", 0.0) + g["lost_failures"] + g["lost_preemption"]
        v = jcts.get(first["policy"]) or []
        out.append(f"{first['policy']}: {first['jobs']['completed']:,} jobs completed"
                   + (f", mean completion time {format_duration(sum(v) / len(v))}" if v else "")
                   + f"; goodput {_pct(first['goodput'])} ({lost:,.0f} GPU-h to restarts and lost work), "
                   f"{_pct(first['utilization']['allocation'])} of GPU time allocated")
    else:
        mean = {p: sum(v) / len(v) for p, v in jcts.items() if v}
        ranked = sorted(mean, key=lambda p: (-summaries[p]["jobs"]["completed"], mean[p]))
        if ranked:
            best = ranked[0]
            done = summaries[best]["jobs"]["completed"]
            # equal as the table prints them (same jobs completed, same mean): no ranking to give
            tied = [p for p in ranked if summaries[p]["jobs"]["completed"] == done
                    and format_duration(mean[p]) == format_duration(mean[best])]
            rest = ", ".join(f"{p} {format_duration(mean[p])} ({summaries[p]['jobs']['completed']:,})"
                             for p in ranked[len(tied):])
            if len(tied) > 1:
                out.append(f"Mean completion time is {format_duration(mean[best])} under {', '.join(tied)} "
                           f"({done:,} completed jobs each): none completes jobs sooner"
                           + (f"; {rest}" if rest else ""))
            else:
                out.append(f"{best} completes jobs soonest: mean completion time {format_duration(mean[best])} over "
                           f"{done:,} completed jobs" + (f"; {rest}" if rest else ""))
            fastest = min(mean, key=lambda p: mean[p])
            if fastest != best:
                out.append(f"{fastest} has a lower mean ({format_duration(mean[fastest])}) but completes fewer jobs "
                           f"({summaries[fastest]['jobs']['completed']:,}): its mean leaves out the jobs it did not finish")
        good = {p: s["goodput"] for p, s in summaries.items() if s["goodput"] is not None}
        if good:
            top, low = max(good, key=lambda p: good[p]), min(good, key=lambda p: good[p])
            g = summaries[low]["gpu_hours"]
            if _pct(good[top]) == _pct(good[low]):    # equal as the table prints them: no ranking to give
                out.append(f"Goodput is {_pct(good[top])} under every policy: none wastes more GPU time than another")
                good = {}
        if good:
            out.append(f"{top} wastes the least GPU time (goodput {_pct(good[top])}); {low} the most "
                       f"({_pct(good[low])}: {g.get('restart_preemption', 0.0):,.0f} GPU-h restarting after "
                       f"preemptions and moves, {g['restart']:,.0f} after failures, "
                       f"{g['lost_failures'] + g['lost_preemption']:,.0f} of work lost)")
    if any(s["partial"] for s in summaries.values()):
        out.append("The run was stopped early (Ctrl-C): the numbers cover the simulated part only")
    return out


def _class_mean(s: dict[str, Any], key: str) -> float | None:
    """Mean over the jobs of every non-replica class (each class's mean weighted by its jobs)."""
    tot = n = 0.0
    for c in s["classes"].values():
        m = (c.get(key) or {}).get("mean")
        if c["kind"] == "replica" or m is None:
            continue
        tot += m * c["jobs"]
        n += c["jobs"]
    return tot / n if n else None


def write_simulate_report(summaries: dict[str, dict[str, Any]], jcts: dict[str, list[float]], path: str) -> None:
    write_report(simulate_report(summaries, jcts), path)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _dur(x: float | None) -> str:
    return "-" if x is None else format_duration(x)


# -- check and comm -----------------------------------------------------------------------

def check_report(data: CheckDocument) -> Report:
    counts = data.counts
    rows = [[f.severity, f.rule, f.where or "", f.title,
             ", ".join(f"{k} {v}" for k, v in f.evidence.items()), f.fix] for f in data.findings]
    verdict = "clean" if not rows else ", ".join(f"{n} {s}" for s, n in counts.items())
    return Report(title=f"Cluster check: {data.cluster}", subtitle=f"jobs: {', '.join(data.jobs) or 'none'}; "
                  f"model {data.model}", facts=[(s, str(n)) for s, n in counts.items()] +
                  [("exit code", f"{data.exit_code} (--fail-on {data.fail_on})")],
                  conclusions=[f"Findings: {verdict}"],
                  tables=[Table("Findings", ["severity", "rule", "where", "finding", "evidence", "fix"], rows)])


def write_check_report(data: CheckDocument, path: str) -> None:
    write_report(check_report(data), path)


def comm_report(data: CommDocument, measured: list[tuple[float, float]] | None = None) -> Report:
    from gpucluster.report.figures_ops import bandwidth_curves

    rows = data.rows
    fig = bandwidth_curves(data.op, [(r.size_bytes, r.busbw_gbps) for r in rows], measured,
                           where=f"on {data.gpus} GPUs")
    table = Table("Expected nccl-tests table", ["size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm",
                                                "limited by"],
                  [[r.size_bytes, r.time_us, r.algbw_gbps, r.busbw_gbps, r.algorithm, r.bottleneck]
                   for r in rows])
    return Report(title=f"Expected {data.op} on {data.gpus} GPUs", subtitle=_placement(data.placement),
                  facts=[("average bus bandwidth", f"{data.avg_busbw_gbps:.1f} GB/s")], figures=[fig],
                  tables=[table])


def _placement(p: Any) -> str:
    if not isinstance(p, dict):
        return str(p)
    up, out = p.get("scale_up") or {}, p.get("scale_out") or {}
    text = f"{p.get('source', '')}: {p.get('gpus')} x {p.get('gpu')} ({p.get('gpus_per_node')} per node)"
    if up:
        text += f"; scale-up {up.get('link')} {up.get('gbps_per_direction')} GB/s per GPU per direction"
    if out:
        text += (f"; scale-out {out.get('nics_per_node')} x {out.get('nic')} per node, "
                 f"{out.get('gbps_per_gpu_per_direction')} GB/s per GPU per direction")
    return text


def write_comm_report(data: CommDocument, path: str, measured: list[tuple[float, float]] | None = None) -> None:
    write_report(comm_report(data, measured), path)


def diagnose_report(cluster: str, threshold: float, findings: list) -> Report:
    """Measured collective bandwidth against the model, one figure per tier."""
    from gpucluster.report.figures_ops import bandwidth_curves

    figures = []
    for f in findings:
        fig = bandwidth_curves(f.op, list(zip(f.sizes, f.expected_gbps, strict=True)),
                               list(zip(f.sizes, f.measured_gbps, strict=True)),
                               where=f"{f.where}, {f.ranks} ranks on {f.nodes} node(s) ({f.tier})")
        fig.key, fig.title = f"bandwidth-{f.tier}", f"Measured against expected: {f.tier} ({f.where})"
        figures.append(fig)
    bad = [f for f in findings if f.bottleneck]
    concl = [("BOTTLENECK: " if f.bottleneck else "ok: ") + f.sentence() for f in findings]
    if not bad:
        concl.append("No tier below the threshold: the fabric delivers what the spec gives")
    rows = [[f.tier, f.where, f.link, f.op, f.ranks, f.nodes, round(f.measured, 2), round(f.expected, 2),
             f"{100 * f.ratio:.0f}%", "yes" if f.bottleneck else "no"] for f in findings]
    table = Table("Tiers", ["tier", "where", "link", "collective", "ranks", "nodes", "measured busbw (GB/s)",
                            "expected busbw (GB/s)", "measured / expected", "bottleneck"], rows)
    notes = [f"{f.source}: {n}" for f in findings for n in f.notes]
    return Report(title=f"Diagnosis: {cluster}", subtitle=f"a tier below {threshold:.0%} of the spec is a bottleneck",
                  facts=[("bottleneck", bad[0].tier if bad else "none")], conclusions=concl, figures=figures,
                  tables=[table], notes=notes)


def write_diagnose_report(cluster: str, threshold: float, findings: list, path: str) -> None:
    write_report(diagnose_report(cluster, threshold, findings), path)


def sweep_report(result: SweepDocument) -> Report:
    """A sweep's tasks: one bar chart per numeric field kept, and the table of every task."""
    from gpucluster.report.figures_ops import sweep_field

    tasks = result.tasks
    varying = [k for k in (tasks[0].params if tasks else {})
               if len({str(t.params.get(k)) for t in tasks}) > 1]

    def name(t: Any) -> str:
        return ", ".join(f"{k}={_short(t.params[k])}" for k in varying) or "the only task"
    ok = [t for t in tasks if t.ok and t.result is not None]
    fields = [f for f in (ok[0].result or {} if ok else {})
              if all(isinstance((t.result or {}).get(f), (int, float)) and not isinstance((t.result or {}).get(f), bool)
                     for t in ok)]
    figures = [sweep_field(f, [name(t) for t in ok], [float((t.result or {})[f]) for t in ok]) for f in fields[:6]]
    keys = list(tasks[0].params) if tasks else []
    flagged = [t for t in tasks if t.flags]
    rows = [[*(_short(t.params.get(k)) for k in keys), "ok" if t.ok else "FAILED",
             *((t.result or {}).get(f) if t.ok else "" for f in fields), "" if t.ok else t.error,
             *(["; ".join(t.flags)] if flagged else [])] for t in tasks]
    table = Table("Tasks", [*keys, "status", *fields, "error", *(["flags"] if flagged else [])], rows)
    concl = [f"{result.ok} of {len(tasks)} tasks ran" + (f"; {result.failed} failed (see the table)"
                                                         if result.failed else "")]
    if flagged:
        concl.insert(0, f"{len(flagged)} of {len(tasks)} tasks are flagged (see the flags column), "
                        f"e.g. {flagged[0].flags[0]}")
    return Report(title=f"Sweep: {result.name}", subtitle=f"on {result.engine}",
                  facts=[("tasks", str(len(tasks))), ("ok", str(result.ok)), ("failed", str(result.failed))],
                  conclusions=concl, figures=figures, tables=[table])


def _short(v: Any) -> str:
    text = str(v)
    return text.rsplit("/", 1)[-1] if "/" in text and len(text) > 30 else text


def write_sweep_report(result: SweepDocument, path: str) -> None:
    write_report(sweep_report(result), path)
