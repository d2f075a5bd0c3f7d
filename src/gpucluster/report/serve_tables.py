"""The HTML report's serving tables beyond the ranking: the best deployment per hardware type
(--compare, --cpu) and the discrete-event check of the ranked deployments (--simulate)."""

from __future__ import annotations

from typing import Any

from gpucluster.report.html import Table


def _shape(o: Any) -> str:
    return "CPU" if o.hardware[0].isdigit() else f"TP{o.tp} x PP{o.pp}"


def _ms(x: float | None) -> Any:
    return "-" if x is None else round(x * 1e3, 1)


def _usd(x: float | None) -> Any:
    return "-" if x is None else round(x, 3)


def per_hardware(result: Any, meta: dict[str, Any]) -> Table | None:
    """The cheapest deployment of each hardware type searched; None with one type."""
    from gpucluster.plan.serve_search import hardware_names, verdicts

    names = hardware_names(meta, result)
    if len(names) < 2:
        return None
    rate, inp, out = meta["rate"], meta["input"], meta["output"]
    seen = verdicts(result)
    rows = []
    for name, o, why in result.best_per_hardware(names):
        tag = ", ".join(t for t, on in (("recommended", o is not None and o is result.best),
                                        ("requested", name == meta.get("requested_hardware"))) if on)
        if o is None:
            rows.append([name, tag, "-", "-", "-", "-", "-", "-", "-", "-", why])
            continue
        rows.append([name, tag, _shape(o), o.replicas, o.gpus, _ms(o.point.ttft_p99), _ms(o.point.tpot_p99),
                     _usd(o.usd_per_hour), _usd(o.usd_per_mtok(rate, out)),
                     _usd(o.usd_per_mtok_in_out(rate, inp, out)),
                     o.binding + (f"; discrete-event check: {seen[id(o)]}" if id(o) in seen else "")])
    return Table("Best deployment per hardware type (the cheapest of each)",
                 ["hardware", "", "shape", "replicas", "GPUs", "TTFT p99 (ms)", "TPOT p99 (ms)", "$/hour",
                  "$ per M output tokens", "$ per M input + output tokens", "binds / why none"], rows)


def simulation_checks(result: Any, meta: dict[str, Any]) -> Table | None:
    """--simulate: each deployment simulated, cheapest first, and its verdict."""
    checks = getattr(result, "checks", None)
    if checks is None:
        return None
    rate, out = meta["rate"], meta["output"]
    rows = []
    for c in checks.checks:
        o = c.option
        rows.append([o.hardware, _shape(o), o.replicas, o.gpus, _usd(o.usd_per_mtok(rate, out)),
                     _ms(o.point.ttft_p99), _ms(o.point.tpot_p99),
                     _ms(c.sim.ttft_p99) if c.simulated else "-", _ms(c.sim.tpot_p99) if c.simulated else "-",
                     c.verdict])
    return Table("Discrete-event check of the ranked deployments (cheapest first, until one meets the SLOs)",
                 ["hardware", "shape", "replicas", "GPUs", "$ per M output tokens", "model TTFT p99 (ms)",
                  "model TPOT p99 (ms)", "simulated TTFT p99 (ms)", "simulated TPOT p99 (ms)", "verdict"], rows,
                 note=checks.summary())
