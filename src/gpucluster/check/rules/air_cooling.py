"""Air cooling above the density air handles (seed 1: "Air cooling at 30kW/rack works fine if
your facility has enough airflow"; "Standard datacenter racks are designed for 10-15kW")."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class AirCooling(Rule):
    id = "air-cooling"
    summary = "air-cooled racks above the air-cooling density limit"

    def check(self, ctx):
        if ctx.spec.facility is None:
            return
        for r in ctx.facility.racks:
            if r.air_too_dense:
                yield Finding(
                    self.id, "warning",
                    f"pool {r.pool}: {r.rack_kw:.1f} kW air-cooled racks, above the {r.air_limit_kw:g} kW air handles",
                    f"direct-to-chip liquid cooling, or {int(r.air_limit_kw // r.node.kw)} nodes per air-cooled rack",
                    {"rack_kw": round(r.rack_kw, 2), "air_limit_kw": r.air_limit_kw, "cooling": r.cooling},
                    ctx.at("facility", "cooling"))
