"""A single-phase feed (seed 1: "the facility had 208V single-phase power instead of 480V
three-phase. The cluster was delivered, racked, and dark for 21 days"). Current per rack and
the branch circuits it needs on this feed against 480 V three-phase (30 A circuits at 80%
continuous load, power factor 0.95: facility.yaml). Error when a rack needs more than two
circuits (an A and a B feed), warning otherwise."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class PowerFeed(Rule):
    id = "power-feed"
    summary = "single-phase (e.g. 208 V) feed for GPU racks"

    def check(self, ctx):
        fac = ctx.spec.facility
        if fac is None or fac.phases != 1:
            return
        worst = max(ctx.facility.racks, key=lambda r: r.rack_kw)
        if worst.rack_kw <= worst.circuit_kw:
            return
        yield Finding(
            self.id, "error" if worst.circuits > 2 else "warning",
            f"{fac.voltage_v:g} V single-phase: a {worst.rack_kw:.1f} kW rack draws {worst.amps_per_phase:.0f} A and "
            f"needs {worst.circuits} circuits of {worst.circuit_kw:.1f} kW; at 480 V three-phase it needs "
            f"{worst.circuits_at_480v_3ph}",
            "get three-phase power (415/480 V) to the racks before the hardware arrives; seed 1 lost 21 days on "
            "exactly this",
            {"voltage_v": fac.voltage_v, "phases": 1, "rack_kw": round(worst.rack_kw, 2),
             "amps": round(worst.amps_per_phase, 1), "circuit_kw": round(worst.circuit_kw, 2),
             "circuits": worst.circuits, "circuits_at_480v_3ph": worst.circuits_at_480v_3ph},
            ctx.at("facility", "phases"))
