"""Inter-node bandwidth per GPU against the scale-up bandwidth (seed 1: "your network bandwidth
between nodes must match or exceed your GPU-to-GPU bandwidth within a node").

No shipping system meets that rule (a DGX H100 gives each GPU one 400G NIC, 50 GB/s, against
450 GB/s of NVLink per direction: 0.11), so the finding states the actual ratio and what the
shortfall costs a training step: the best layout's step time on this network against the same
GPUs with one NDR400 per GPU (the DGX SuperPOD design). Severity from that slowdown:
info below 1.1x, warning from 1.1x, error from 1.5x. Single-node jobs are not checked.
"""

from __future__ import annotations

from gpucluster.check.findings import Finding, severity_by_slowdown
from gpucluster.check.rules.base import Rule, rule
from gpucluster.plan.advise import REFERENCE_NIC


@rule
class ScaleOutBandwidth(Rule):
    id = "scale-out-bandwidth"
    summary = "inter-node bandwidth per GPU far below the scale-up bandwidth, and what it costs a step"

    def check(self, ctx):
        from gpucluster.catalog import catalog
        from gpucluster.plan.fabric_from import with_network

        p = ctx.pool
        fab = ctx.target.fabric
        if ctx.job_nodes * p.gpus_per_node <= fab.domain:
            return
        nic = fab.nic_gbps_per_gpu or 0.0
        up = p.gpu_entry.scale_up.bandwidth_gbps_per_direction.value
        ratio = nic / up
        if ratio >= 1:
            return
        ref_gbps = catalog.nics.get(REFERENCE_NIC).line_rate_gbit.value / 8
        ev = {"nic_gbps_per_gpu": nic, "scale_up_gbps_per_gpu": up, "ratio": round(ratio, 4),
              "reference": f"1 x {REFERENCE_NIC} per GPU = {ref_gbps:g} GB/s", "model": ctx.model_note}
        slowdown = 1.0
        if nic < ref_gbps:
            step = ctx.step_s()
            ref = ctx.step_s(with_network(ctx.target, REFERENCE_NIC, p.gpus_per_node).fabric)
            if step and ref:
                slowdown = step / ref
                ev |= {"step_s": round(step, 4), "step_s_with_reference_network": round(ref, 4),
                       "slowdown": round(slowdown, 3)}
        sev = severity_by_slowdown(slowdown)
        cost = (f"; a {ev['model']} step takes {slowdown:.2f}x as long as with {REFERENCE_NIC} per GPU"
                if slowdown > 1 else "")
        yield Finding(self.id, sev,
                      f"{p.nics_per_node} x {p.nic} per node gives {nic:g} GB/s per GPU, {ratio:.3f}x the "
                      f"{up:g} GB/s of {p.gpu_entry.scale_up.link} (seed rule: >= 1x){cost}",
                      "one 400G InfiniBand NIC per GPU (rail-optimized) is the reference design; the seed's "
                      "'match or exceed' is met by no shipping system, so judge by the step-time cost"
                      if sev != "info" else "none needed beyond the reference design; the ratio is for the record",
                      ev, ctx.at("node_pools", ctx.pool_index(), "nic"))
