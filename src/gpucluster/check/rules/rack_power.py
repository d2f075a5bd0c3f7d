"""Rack power over the budget: nodes per rack x node power at full load (the vendor's system
maximum where facility.yaml has one, else the parts: GPU and CPU TDP, NICs, host remainder)
against facility.rack_kw_budget. An error when over; a warning up to 5% over only for a node
summed from parts, the margin of its host remainder (an estimate: fans, DRAM, NVMe, PSU losses)."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


MARGIN = 0.05


@rule
class RackPower(Rule):
    id = "rack-power"
    summary = "rack power over the rack budget"

    def check(self, ctx):
        if ctx.spec.facility is None:
            return
        for r in ctx.facility.racks:
            if not r.over_budget:
                continue
            # The margin covers the host-remainder estimate; a vendor's rated system maximum has none.
            close = r.node.estimate and r.rack_kw <= r.budget_kw * (1 + MARGIN)
            yield Finding(
                self.id, "warning" if close else "error",
                f"pool {r.pool}: {r.nodes_per_rack} nodes x {r.node.kw:.2f} kW = {r.rack_kw:.1f} kW per rack, over "
                f"the {r.budget_kw:g} kW budget" + (" (by less than the uncertainty of the host estimate)" if close
                                                    else ""),
                f"put {r.nodes_that_fit} nodes per rack ({r.racks} -> "
                f"{-(-ctx.spec.pool(r.pool).count // max(1, r.nodes_that_fit))} racks) or raise the rack budget "
                f"to {r.rack_kw:.1f} kW",
                {"node_kw": round(r.node.kw, 3), "rack_kw": round(r.rack_kw, 2), "budget_kw": r.budget_kw,
                 "nodes_per_rack": r.nodes_per_rack, "nodes_that_fit": r.nodes_that_fit,
                 "node_power": "; ".join(r.node.provenance)},
                ctx.at("facility", "nodes_per_rack"))
