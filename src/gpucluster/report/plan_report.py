"""HTML reports of `plan train` and `plan serve`."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gpucluster.errors import UserError
from gpucluster.report.html import Report, Table, write_report
from gpucluster.safe_text import one_line
from gpucluster.units import format_duration

# Cluster sizes of the scaling curve, as multiples of the planned node count.
SCALE_FACTORS = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4)


def _si(x: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"


def scaling_points(plan: Any, fixed: dict[str, Any] | None = None, tp_across_domains: bool = False
                   ) -> tuple[list[dict[str, Any]], list[str]]:
    """Run the layout search at several node counts around the plan's (same model, batch and
    fabric). Sizes where nothing fits are left out of the points and named, with why, in the
    second list (the report says so under the scaling table)."""
    from gpucluster.plan.train_search import search

    tgt, best = plan.target, plan.best
    per_node = tgt.fabric.gpus_per_node
    rent = plan.rental()
    keep = {k: v for k, v in (fixed or {}).items() if k not in ("dp",)}
    nodes = sorted({max(1, round(tgt.nodes * f)) for f in SCALE_FACTORS})
    out = []
    left_out: list[str] = []
    for n in nodes:
        gpus = n * per_node
        if n == tgt.nodes:
            est = best
        else:
            fab = dataclasses.replace(tgt.fabric, domain=min(tgt.fabric.domain, gpus)) \
                if tgt.fabric.domain > per_node else tgt.fabric
            try:
                res = search(plan.spec, fab, gpus, plan.global_batch, fixed=keep, seq_len=plan.seq_len, top=1,
                             tp_across_domains=tp_across_domains, precision=best.layout.precision)
            except (UserError, ValueError) as exc:   # a size the search cannot lay out at all
                left_out.append(f"{gpus:,} GPUs ({one_line(getattr(exc, 'message', None) or exc)})")
                continue
            est = res.best
            if est is None:
                left_out.append(f"{gpus:,} GPUs (no layout fits in memory)")
                continue
        time_s = plan.steps * est.step_s
        out.append({"gpus": gpus, "nodes": n, "time_s": time_s, "layout": est.layout.short(), "mfu": est.mfu,
                    "cost_usd": None if rent is None else rent[0] * time_s * gpus / 3600})
    return out, left_out


def train_report(plan: Any, meta: dict[str, Any], *, fixed: dict[str, Any] | None = None,
                 tp_across_domains: bool = False) -> Report:
    from gpucluster.model.training.step import TERMS
    from gpucluster.plan.advise import LABEL
    from gpucluster.report import figures as F

    from gpucluster.plan.confidence import distinguishable, step_interval

    best, spec, tgt = plan.best, plan.spec, plan.target
    rent = plan.rental()
    name = spec.name or "model"
    iv = step_interval(plan)
    lo, hi, pct = iv.lo / best.step_s, iv.hi / best.step_s, f"{100 * iv.level:.0f}%"
    facts = [("model", f"{name} ({_si(meta['params'])} parameters)"), ("cluster", tgt.description),
             ("recommended layout", best.layout.short()),
             ("step time", f"{best.step_s:.3f} s ({pct} interval {iv.lo:.3f}-{iv.hi:.3f} s)"),
             ("MFU", f"{100 * best.mfu:.1f}%"),
             ("tokens per second", f"{best.tokens_per_s:,.0f} ({best.tokens_per_s / hi:,.0f}-{best.tokens_per_s / lo:,.0f})"),
             ("time to train", f"{format_duration(plan.time_to_train_s)} for {_si(plan.tokens)} tokens "
                               f"({pct} interval {format_duration(plan.time_to_train_s * lo)}-"
                               f"{format_duration(plan.time_to_train_s * hi)})"),
             ("GPU-hours", f"{plan.gpu_hours:,.0f} ({plan.gpu_hours * lo:,.0f}-{plan.gpu_hours * hi:,.0f})")]
    if rent:
        cost = rent[0] * plan.gpu_hours
        facts.append(("cost, rented", f"${cost:,.0f} at ${rent[0]:.2f}/GPU-hour (${cost * lo:,.0f}-${cost * hi:,.0f})"))
    facts += failure_facts(plan.with_failures, lo, hi, pct)
    labels = {k: LABEL[k] for k in TERMS}
    ranked = plan.search.ranked
    points, left_out = scaling_points(plan, fixed, tp_across_domains)
    figures = [
        F.step_breakdown(best.terms, labels, best.step_s),
        F.memory_per_gpu([(e.layout.short(), [r for r in e.memory.rows() if r[0] not in ("total", "HBM")],
                           e.memory.capacity) for e in ranked]),
        F.scaling_curve(points, tgt.gpus),
    ]
    if len(ranked) > 1:
        figures.append(F.top_layouts([(e.layout.short(), e.terms, e.mfu) for e in ranked], labels))
    rows, ties = [], 0
    for i, e in enumerate(ranked, 1):
        ei = step_interval(plan, e)
        apart = distinguishable(iv, ei)
        ties += i > 1 and not apart
        rows.append([i, e.layout.short(), round(e.step_s, 3), f"{ei.lo:.3f}-{ei.hi:.3f}",
                     "" if i == 1 else ("slower" if apart else "not distinguishable"), f"{100 * e.mfu:.1f}%",
                     round(e.memory.total / 2**30, 1), round(e.tokens_per_s)])
    layouts = Table("Layouts searched (best first)",
                    ["#", "layout", "step (s)", f"{pct} step (s)", "vs #1", "MFU", "memory (GiB)", "tokens/s"], rows,
                    note=f"searched {plan.search.considered:,} layouts, {plan.search.estimated:,} fit in memory"
                         + (f"; {ties} of the next layouts lie within #1's {pct} interval: the model's accuracy "
                            "cannot order them" if ties else ""))
    scale = Table("Scaling: the same run on more or fewer nodes",
                  ["GPUs", "nodes", "best layout", "time to train", "MFU", "cost, rented ($)"],
                  [[p["gpus"], p["nodes"], p["layout"], format_duration(p["time_s"]), f"{100 * p['mfu']:.1f}%",
                    "-" if p["cost_usd"] is None else round(p["cost_usd"])] for p in points],
                  note="left out: " + "; ".join(left_out) if left_out else "")
    notes = [f"fabric: {tgt.fabric.describe()}", f"tokens: {meta['tokens_source']}",
             f"global batch {plan.global_batch} x {plan.seq_len} tokens: {meta['global_batch_source']}",
             f"total compute {plan.total_model_flops:.3g} FLOPs (Megatron's count; 6 x N x D gives {plan.six_nd:.3g})"]
    if rent:
        notes.append(f"rental price: {rent[1]}")
    conf = plan.confidence
    notes.append(f"{pct} interval: regime {iv.regime}; from {iv.basis} (catalog/data/intervals.yaml)")
    notes += [f"assumption: {a}" for a in conf.assumptions if a != conf.above_best_published]
    if plan.with_failures is not None:
        notes += [f"with failures, assumption: {a}" for a in plan.with_failures.assumptions]
    warnings = [f"Above the best published run: {conf.above_best_published}."] if conf.above_best_published else []
    return Report(title=f"Training plan: {name} on {tgt.description}",
                  subtitle=f"{_si(plan.tokens)} tokens, global batch {plan.global_batch} x {plan.seq_len} tokens, "
                           f"{best.layout.precision}",
                  facts=facts, conclusions=warnings + [f"Bottleneck: {plan.advice.text}."] + (
                      [f"Confidence: {conf.level} ({len(conf.assumptions)} assumptions, listed in the notes); "
                       f"{pct} interval of the step time {iv.lo:.3f}-{iv.hi:.3f} s, from the cross-validated errors "
                       f"of its regime ({iv.regime})."]),
                  figures=figures,
                  tables=[layouts, scale], notes=notes)


def failure_facts(w: Any, lo: float, hi: float, pct: str) -> list[tuple[str, str]]:
    """The run with failures, restarts and checkpoint writes (plan/train_goodput.py) as report facts."""
    if w is None:
        return []
    out = [("time to train with failures", f"{format_duration(w.wall_s)}, goodput {100 * w.goodput:.1f}% "
                                            f"({pct} interval {format_duration(w.wall_s * lo)}-"
                                            f"{format_duration(w.wall_s * hi)}; restarts and checkpoint writes included)"),
           ("GPU-hours with failures", f"{w.gpu_hours:,.0f} ({w.gpu_hours * lo:,.0f}-{w.gpu_hours * hi:,.0f})")]
    if w.cost_usd is not None:
        out.append(("cost with failures", f"${w.cost_usd:,.0f} (${w.cost_usd * lo:,.0f}-${w.cost_usd * hi:,.0f})"))
    out.append(("checkpoint interval", f"{format_duration(w.interval_s)} ({w.save_interval:,} iterations, "
                                       f"{'given' if w.interval_source == 'given' else 'Daly'}); "
                                       f"{format_duration(w.write_s)} write, restart {format_duration(w.restart_s)}, "
                                       f"one failure every {format_duration(w.mtbf_s)}; generate with "
                                       f"{' '.join(w.generate_flags)}"))
    return out


def write_train_report(plan: Any, meta: dict[str, Any], path: str, **kw: Any) -> None:
    write_report(train_report(plan, meta, **kw), path)


def _serving_curve(best: Any, spec: Any, fabrics: list, traffic: Any, quant: Any) -> list[tuple]:
    """One replica of the recommended shape from light load to its capacity."""
    from gpucluster.model.serving.queueing import StepModel, Traffic, analyze, saturated
    from gpucluster.model.serving.step_time import Replica

    fab = next((f for f in fabrics if f.gpu_name == best.hardware), None)
    if fab is None:
        return []
    step = StepModel(Replica(spec, fab, best.tp, best.pp, quant))
    top = saturated(step, traffic, best.max_batch).rate
    out: list[tuple] = []
    for i in range(1, 41):
        p = analyze(step, Traffic(top * (i / 40) ** 0.7 * 0.995, traffic.input, traffic.output), best.max_batch)
        if not (p.stable and math.isfinite(p.ttft_p99)):
            continue
        # Stop where queueing has made TTFT 30x the light-load value: the rest is a wall.
        if out and p.ttft_p99 > 30 * out[0][1]:
            break
        out.append((p.tokens_per_s, p.ttft_p99, p.tpot_p99))
    return out


def serve_report(result: Any, meta: dict[str, Any], sim: Any, *, spec: Any, fabrics: list, traffic: Any,
                 quant: Any) -> Report:
    from gpucluster.documents.plan_serve import USD_PER_MTOK, USD_PER_MTOK_IN_OUT
    from gpucluster.plan.confidence import serving_intervals
    from gpucluster.report import figures as F
    from gpucluster.report import serve_tables as ST

    rate, out = meta["rate"], meta["output"]
    b = result.best
    p = b.point
    shape = "CPU node" if b.hardware[0].isdigit() else f"TP{b.tp} x PP{b.pp}"
    mtok = b.usd_per_mtok(rate, out)
    moe, engine = spec is not None and spec.experts > 1, meta.get("engine")
    iv = serving_intervals(b, rate, out, moe=moe, engine=engine)
    cap = iv["per_replica_rate"]
    pct = f"{100 * cap.level:.0f}%"

    def ms(key: str) -> str:
        return f" ({iv[key].lo * 1e3:,.0f}-{iv[key].hi * 1e3:,.0f})" if key in iv else ""

    facts = [("model", meta["model"]), ("request rate", f"{rate:,.0f} requests/s"),
             ("deployment", f"{b.replicas:,} x {b.hardware} {shape} = {b.gpus:,} processors"),
             ("capacity per replica", f"{b.per_replica_rate:,.2f} requests/s ({pct} interval {cap.lo:,.2f}-"
                                      f"{cap.hi:,.2f}: {math.ceil(rate / cap.hi):,}-{math.ceil(rate / cap.lo):,} replicas)"),
             ("TTFT p50 / p99", f"{p.ttft_p50 * 1e3:,.0f}{ms('ttft_p50_s')} / {p.ttft_p99 * 1e3:,.0f}{ms('ttft_p99_s')} ms"),
             ("output tokens/s", f"{rate * out:,.0f}"), ("binding constraint", b.binding)]
    if p.tpot_p99 is not None:
        facts.insert(5, ("TPOT p50 / p99", f"{p.tpot_p50 * 1e3:,.1f}{ms('tpot_p50_s')} / "
                                           f"{p.tpot_p99 * 1e3:,.1f}{ms('tpot_p99_s')} ms"))
    if mtok is not None:
        band = (f"; {pct} interval ${iv['usd_per_mtok'].lo:.3f}-${iv['usd_per_mtok'].hi:.3f}"
                if "usd_per_mtok" in iv else "")
        facts.append(("cost", f"${mtok:.3f} per million output tokens (${b.usd_per_hour:,.0f}/hour{band})"))
    mio = b.usd_per_mtok_in_out(rate, meta["input"], out)
    if mio is not None:
        facts.append(("cost, input + output", f"${mio:.3f} per million input + output tokens"))
    curve = _serving_curve(b, spec, fabrics, traffic, quant)
    opts = [{"name": f"{o.hardware} {'CPU' if o.hardware[0].isdigit() else f'TP{o.tp}xPP{o.pp}'}",
             "usd_per_mtok": o.usd_per_mtok(rate, out), "gpus": o.gpus, "ttft_p99_s": o.point.ttft_p99}
            for o in result.options[:12]]
    figures = [F.serving_curve(curve, slo_ttft_s=meta["slo_ttft_s"], slo_tpot_s=meta["slo_tpot_s"],
                               operating=(p.tokens_per_s, p.ttft_p99, p.tpot_p99) if curve else None,
                               replica=f"{b.hardware} {shape}", binding=b.binding),
               F.serving_options(opts)]
    rows, ties = [], 0
    for i, o in enumerate(result.options[:20]):
        m = o.usd_per_mtok(rate, out)
        oi = serving_intervals(o, rate, out, moe=moe, engine=engine).get("usd_per_mtok")
        tie = i > 0 and oi is not None and "usd_per_mtok" in iv and (
            iv["usd_per_mtok"].contains(oi.point) or oi.contains(iv["usd_per_mtok"].point))
        ties += tie
        rows.append([o.hardware, "CPU" if o.hardware[0].isdigit() else f"TP{o.tp} x PP{o.pp}", o.replicas, o.gpus,
                     o.max_batch, round(o.per_replica_rate, 2), round(o.point.ttft_p99 * 1e3, 1),
                     "-" if o.point.tpot_p99 is None else round(o.point.tpot_p99 * 1e3, 1),
                     "-" if m is None else round(m, 3),
                     "-" if oi is None else f"{oi.lo:.3f}-{oi.hi:.3f}" + (" (within #1's)" if tie else ""),
                     "-" if (mio := o.usd_per_mtok_in_out(rate, meta["input"], out)) is None else round(mio, 3),
                     o.binding])
    table = Table("Deployments within the SLOs (cheapest first; without a price, fewest GPUs first)",
                  ["hardware", "shape", "replicas", "GPUs", "max batch", "req/s per replica", "TTFT p99 (ms)",
                   "TPOT p99 (ms)", "$ per M tokens (output)", f"{pct} $ per M tokens (output)",
                   "$ per M input + output tokens", "binds"], rows,
                  note=(f"{ties} alternative(s) cost within the recommended deployment's {pct} interval: the model's "
                        "accuracy cannot rank them" if ties else ""))
    slo = [f"TTFT p99 <= {meta['slo_ttft_s'] * 1e3:g} ms"] if meta["slo_ttft_s"] else []
    slo += [f"TPOT p99 <= {meta['slo_tpot_s'] * 1e3:g} ms"] if meta["slo_tpot_s"] else []
    conclusions = [f"Serve with {b.replicas:,} replica(s) of {b.hardware} {shape}; what binds: {b.binding}."]
    checks = getattr(result, "checks", None)
    if checks is not None:
        line = f"Discrete-event check: {checks.summary()}."
        if checks.passed:
            conclusions.append(line)
        else:
            conclusions.insert(0, line)     # the recommendation breaks the SLOs in simulation: read first
    if sim is not None:
        conclusions.append(f"A discrete-event run of one replica ({sim.requests} requests) gives TTFT p99 "
                           f"{sim.ttft_p99 * 1e3:,.0f} ms (the queueing model: {p.ttft_p99 * 1e3:,.0f} ms).")
    tables = [table] + [x for x in (ST.per_hardware(result, meta), ST.simulation_checks(result, meta)) if x is not None]
    notes = [f"traffic: {meta['input']} prompt + {out} output tokens per request, {meta['lengths']} lengths, "
             "Poisson arrivals", f"weights {meta['weights']}, KV cache {meta['kv']}",
             f"serving efficiency {b.efficiency[0]:g}: {b.efficiency[1]}",
             f"{pct} intervals: regime {cap.regime}; throughput and cost from {cap.basis}"
             + (f"; TTFT from {iv['ttft_p50_s'].basis}" if "ttft_p50_s" in iv else "")
             + (f"; TPOT from {iv['tpot_p50_s'].basis}" if "tpot_p50_s" in iv else "")
             + " (catalog/data/intervals.yaml; the cost scales as the replicas the capacity interval needs)"]
    if b.price_source:
        notes.append(f"price: {b.price_source}")
    notes += [f"cost formulas: {USD_PER_MTOK}; {USD_PER_MTOK_IN_OUT}"]
    requested = meta.get("requested_hardware")
    which = "requested" if requested in (None, b.hardware) else "compared"
    compared = [c for c in meta.get("compared", []) if c != b.hardware]
    return Report(title=f"Serving plan: {meta['model']} at {rate:,.0f} requests/s",
                  subtitle=f"{b.replicas:,} x {b.hardware} {shape} = {b.gpus:,} processors, on {b.hardware} "
                           f"({which}; requested: {meta['target']}"
                           + (f"; also compared: {', '.join(compared)}" if compared else "")
                           + f"); SLO: {', '.join(slo) or 'none'}", facts=facts,
                  conclusions=conclusions, figures=figures, tables=tables, notes=notes)


def write_serve_report(result: Any, meta: dict[str, Any], sim: Any, path: str, **kw: Any) -> None:
    write_report(serve_report(result, meta, sim, **kw), path)
