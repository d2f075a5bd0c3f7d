"""An oversubscribed fabric under training all-reduce: traffic that leaves a leaf shares
1/oversubscription of the bandwidth. Evidence: cross-leaf bandwidth per GPU, and the best
step time on this fabric against the same fabric non-blocking. Severity from the slowdown
(warning from 1.1x, error from 1.5x; below 1.1x an info finding). Only when the job spans leaves.
"""

from __future__ import annotations

from dataclasses import replace

from gpucluster.check.findings import Finding, severity_by_slowdown
from gpucluster.check.rules.base import Rule, rule


@rule
class OversubscribedFabric(Rule):
    id = "oversubscribed-fabric"
    summary = "leaf uplinks oversubscribed under training all-reduce"

    def check(self, ctx):
        fab = ctx.target.fabric
        over = fab.oversubscription
        if over <= 1 or ctx.job_nodes <= (fab.nodes_per_leaf or 1):
            return
        step = ctx.step_s()
        full = ctx.step_s(replace(fab, oversubscription=1.0))
        slowdown = step / full if step and full else 1.0
        nic = fab.nic_gbps_per_gpu or 0.0
        ev = {"oversubscription": over, "nic_gbps_per_gpu": nic, "cross_leaf_gbps_per_gpu": nic / over,
              "nodes_per_leaf": fab.nodes_per_leaf, "job_nodes": ctx.job_nodes, "model": ctx.model_note}
        if step and full:
            ev |= {"step_s": round(step, 4), "step_s_non_blocking": round(full, 4), "slowdown": round(slowdown, 3)}
        yield Finding(self.id, severity_by_slowdown(slowdown),
                      f"{over:g}:1 oversubscribed leaves: {nic / over:g} GB/s per GPU across leaves instead of "
                      f"{nic:g}; a {ev['model']} step is {slowdown:.2f}x the non-blocking one",
                      "non-blocking (1:1) leaf uplinks for training, or keep each job's data-parallel rings within "
                      "a leaf (topology-aware placement)",
                      ev, ctx.at("fabric", "oversubscription"))
