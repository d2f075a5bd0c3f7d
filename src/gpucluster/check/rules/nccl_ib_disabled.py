"""NCCL_IB_DISABLE=1 on an InfiniBand or RoCE cluster: NCCL stops using RDMA (its IB verbs
transport, which RoCE uses too) and falls back to TCP sockets. Evidence: the collective model's
1 GiB all-reduce bus bandwidth over the job's GPUs on RDMA against TCP at the same line rate."""

from __future__ import annotations

from dataclasses import replace

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule

TRUE = ("1", "true", "yes", "on")


@rule
class NcclIbDisabled(Rule):
    id = "nccl-ib-disabled"
    summary = "NCCL_IB_DISABLE=1 on an InfiniBand/RoCE cluster"

    def check(self, ctx):
        from gpucluster.model.collectives import predict

        fabric = ctx.pool.nic_entry.fabric
        if fabric not in ("infiniband", "roce"):
            return
        for job, s in ctx.job_settings("NCCL_IB_DISABLE"):
            if s.value.strip().lower() not in TRUE:
                continue
            ev = {"nic": ctx.pool.nic, "fabric": fabric, "value": s.value}
            fab = ctx.target.fabric
            if ctx.job_nodes > 1:
                gpus = ctx.job_gpus
                rdma = predict("all_reduce", 2**30, fab.group(gpus, 1)).busbw_gbps
                tcp = predict("all_reduce", 2**30, replace(fab, scale_out_link="Ethernet").group(gpus, 1)).busbw_gbps
                ev |= {"busbw_gbps_rdma": round(float(rdma), 2), "busbw_gbps_tcp": round(float(tcp), 2), "gpus": gpus}
            tail = (f": 1 GiB all-reduce {ev['busbw_gbps_tcp']} GB/s instead of {ev['busbw_gbps_rdma']}"
                    if "busbw_gbps_tcp" in ev else "")
            kind = "InfiniBand" if fabric == "infiniband" else "RoCE"
            yield Finding(self.id, "error", f"NCCL_IB_DISABLE={s.value} turns off RDMA on an {kind} cluster; NCCL "
                          f"falls back to TCP sockets{tail}",
                          "remove NCCL_IB_DISABLE (or set it to 0)", ev, job.at(s.line))
