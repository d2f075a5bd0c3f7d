"""Terminal and JSON rendering of a training plan."""

from __future__ import annotations

from typing import Any

from gpucluster.cli.render import console, num, print_json, safe
from gpucluster.model.training.step import TERMS
from gpucluster.plan.advise import LABEL
from gpucluster.plan.confidence import distinguishable, step_interval
from gpucluster.plan.train_plan import TrainingPlan
from gpucluster.units import format_duration

BAR = 40


def _si(x: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{prefix}{unit}"
    return f"{x:.3g}{unit}"


def render_plan(plan: TrainingPlan, meta: dict[str, Any], top: int) -> None:
    from rich.table import Table

    best, spec, tgt = plan.best, plan.spec, plan.target
    console.print(f"[bold]Training plan[/bold]: {safe(spec.name or 'model')} ({_si(meta['params'])} parameters) on "
                  f"{safe(tgt.description)}")
    console.print(f"  fabric: {safe(tgt.fabric.describe())}")
    console.print(f"  {_si(plan.tokens)} tokens ({safe(meta['tokens_source'])}), global batch {plan.global_batch} x "
                  f"{plan.seq_len} tokens ({safe(meta['global_batch_source'])})")
    console.print(f"\n[bold]Recommended layout[/bold]: {best.layout.short()}")
    console.print(f"  step {best.step_s:.3f} s | {num(best.tokens_per_s, 0)} tokens/s "
                  f"({num(best.tokens_per_s_per_gpu, 0)} per GPU) | model {best.model_tflops_per_gpu:.0f} TFLOP/s "
                  f"per GPU | MFU {100 * best.mfu:.1f}% | HFU {100 * best.hfu:.1f}% "
                  f"(of {best.peak_tflops:g} TFLOP/s {best.layout.precision} peak)")
    iv = step_interval(plan)
    console.print(f"  [bold]{100 * iv.level:.0f}% interval[/bold]: step {iv.lo:.3f}-{iv.hi:.3f} s | "
                  f"{num(best.tokens_per_s * best.step_s / iv.hi, 0)}-{num(best.tokens_per_s * best.step_s / iv.lo, 0)} "
                  f"tokens/s | MFU {100 * best.mfu * best.step_s / iv.hi:.1f}-{100 * best.mfu * best.step_s / iv.lo:.1f}%")
    console.print(f"  [dim]regime: {safe(iv.regime)}; from {safe(iv.basis)}[/dim]")
    conf = plan.confidence
    if conf.above_best_published:
        console.print(f"  [bold yellow]above the best published run[/bold yellow]: {safe(conf.above_best_published)}")
    elif conf.best_published:
        on = "its nearest validated sibling" if conf.reference and conf.reference.borrowed else "this GPU"
        console.print(f"  [dim]best published {best.layout.precision} MFU on {on}: {safe(conf.best_published)}[/dim]")
    for a in conf.assumptions:
        if a == conf.above_best_published:   # printed above, in bold
            continue
        console.print(f"  [yellow]assumption[/yellow]: {safe(a)}")

    t = Table(title="Step time breakdown", title_justify="left")
    for col in ("term", "seconds", "share", ""):
        t.add_column(col, justify="right" if col in ("seconds", "share") else "left")
    for term in TERMS:
        v = best.terms[term]
        if v <= 0:
            continue
        share = v / best.step_s
        t.add_row(LABEL[term], f"{v:.3f}", f"{100 * share:.1f}%", "█" * max(1, round(BAR * share)))
    t.add_row("[bold]step[/bold]", f"[bold]{best.step_s:.3f}[/bold]", "100%", "")
    console.print(t)

    m = Table(title="Memory per GPU", title_justify="left")
    m.add_column("item")
    m.add_column("GiB", justify="right")
    for name, value in best.memory.rows():
        m.add_row(name, f"{value / 2**30:.1f}")
    console.print(m)

    console.print(f"[bold]Time to train[/bold] {_si(plan.tokens)} tokens: {format_duration(plan.time_to_train_s)} "
                  f"({num(plan.steps, 0)} steps) = {num(plan.gpu_hours, 0)} GPU-hours "
                  f"[dim]({100 * iv.level:.0f}% interval {format_duration(plan.time_to_train_s * iv.lo / best.step_s)}-"
                  f"{format_duration(plan.time_to_train_s * iv.hi / best.step_s)})[/dim]")
    rent = plan.rental()
    if rent:
        cost = rent[0] * plan.gpu_hours
        console.print(f"  at ${rent[0]:.2f} per GPU-hour: ${num(cost, 0)} [dim]({100 * iv.level:.0f}% interval "
                      f"${num(cost * iv.lo / best.step_s, 0)}-${num(cost * iv.hi / best.step_s, 0)}; "
                      f"{safe(rent[1])})[/dim]")
    console.print(f"  total compute {plan.total_model_flops:.3g} FLOPs (Megatron's count; 6 x N x D gives "
                  f"{plan.six_nd:.3g}); on one {safe(tgt.fabric.gpu_name)} at this per-GPU rate: "
                  f"{format_duration(plan.one_gpu_s)}")
    _render_failures(plan, iv)

    if len(plan.search.ranked) > 1:
        ranked = Table(title=f"Top {min(top, len(plan.search.ranked))} layouts", title_justify="left")
        band = f"{100 * iv.level:.0f}% step s"
        for col in ("#", "layout", "step s", band, "vs #1", "MFU", "GiB", "largest overhead"):
            ranked.add_column(col, justify="right" if col in ("#", "step s", band, "MFU", "GiB") else "left")
        ties = 0
        for i, e in enumerate(plan.search.ranked, 1):
            over = max((k for k in e.terms if k != "compute"), key=lambda k: e.terms[k])
            ei = step_interval(plan, e)
            apart = distinguishable(iv, ei)
            ties += i > 1 and not apart
            ranked.add_row(str(i), e.layout.short(), f"{e.step_s:.3f}", f"{ei.lo:.3f}-{ei.hi:.3f}",
                           "" if i == 1 else ("slower" if apart else "[yellow]not distinguishable[/yellow]"),
                           f"{100 * e.mfu:.1f}%", f"{e.memory.total / 2**30:.0f}", f"{LABEL[over]} {e.terms[over]:.2f} s")
        console.print(ranked)
        console.print(f"  why #1 wins: {_why(plan)}")
        if ties:
            console.print(f"  [yellow]{ties} of the next layouts lie within #1's {100 * iv.level:.0f}% interval[/yellow]"
                          ": the model's accuracy cannot order them; measure before choosing among them")
    console.print(f"[bold]Bottleneck[/bold]: {safe(plan.advice.text)}")
    s = plan.search
    console.print(f"[dim]searched {s.considered} layouts, {s.estimated} fit in memory"
                  + (f"; rejected: {safe(', '.join(f'{n} x {r}' for r, n in s.rejected.most_common(3)))}"
                     if s.rejected else "")
                  + "[/dim]")


def _render_failures(plan: TrainingPlan, iv: Any) -> None:
    """Time to train with failures, restarts and checkpoint writes (plan/train_goodput.py)."""
    w = plan.with_failures
    if w is None:
        return
    lo, hi, pct = iv.lo / plan.best.step_s, iv.hi / plan.best.step_s, f"{100 * iv.level:.0f}%"
    console.print(f"[bold]With failures, restarts and checkpoints[/bold]: {format_duration(w.wall_s)} = "
                  f"{num(w.gpu_hours, 0)} GPU-hours, goodput {100 * w.goodput:.1f}% "
                  f"[dim]({pct} interval {format_duration(w.wall_s * lo)}-{format_duration(w.wall_s * hi)})[/dim]")
    cost = w.cost_usd
    if cost is not None:
        console.print(f"  at ${w.usd_per_gpu_hour:.2f} per GPU-hour: ${num(cost, 0)} "
                      f"[dim]({pct} interval ${num(cost * lo, 0)}-${num(cost * hi, 0)})[/dim]")
    console.print(f"  checkpoint every {format_duration(w.interval_s)} ({w.save_interval:,} iterations, "
                  f"{'given' if w.interval_source == 'given' else 'Daly'}; Young {format_duration(w.young_s)}): "
                  f"{format_duration(w.write_s)} write, restart {format_duration(w.restart_s)}, one failure every "
                  f"{format_duration(w.mtbf_s)} (~{num(w.expected_failures, 0)} in the run)")
    console.print(f"  [dim]the generated job checkpoints at this interval with: gpucluster generate ... "
                  f"{safe(' '.join(w.generate_flags))}[/dim]")
    for a in w.assumptions:
        console.print(f"  [yellow]assumption[/yellow]: {safe(a)}")


def _why(plan: TrainingPlan) -> str:
    a, b = plan.search.ranked[0], plan.search.ranked[1]
    diffs = sorted(((b.terms[k] - a.terms[k], k) for k in TERMS), reverse=True)
    gain, term = diffs[0]
    if b.step_s - a.step_s < 1e-9:
        return f"#2 ({b.layout.short()}) is as fast; #1 is the simpler layout"
    return (f"{100 * (b.step_s / a.step_s - 1):.1f}% faster than #2 ({b.layout.short()}), "
            f"mostly {gain:.3f} s less {LABEL[term]}")


def render_json(plan: TrainingPlan, meta: dict[str, Any]) -> None:
    """`--json`: the gpucluster-plan-train/v1 document (documents/plan_train.py)."""
    from gpucluster.documents.plan_train import build

    print_json(build(plan).dump())
