"""The shared file system slower than the GPUs consume their input.

Need: `--input-gbps-per-gpu` x GPUs when given (image, video, multimodal data), else the
training plan's tokens/s x bytes per token id (2 or 4, facility.yaml). Supply: the fastest
shared tier's read bandwidth, capped by the nodes' storage links. Error above the supply,
warning above half of it (checkpoint reads and other jobs share it)."""

from __future__ import annotations

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class StorageFeed(Rule):
    id = "storage-feed"
    summary = "parallel file system slower than the GPUs consume"

    def check(self, ctx):
        from gpucluster.catalog.operations import facility_limits
        from gpucluster.errors import UserError
        from gpucluster.model.checkpoint import SHARED_KINDS, node_storage_gbps
        from gpucluster.model.facility import bytes_per_token

        shared = [t for t in ctx.spec.storage if t.kind in SHARED_KINDS]
        if not shared:
            return
        gpus = ctx.job_gpus
        if ctx.input_gbps_per_gpu is not None:
            need, basis = gpus * ctx.input_gbps_per_gpu, f"{ctx.input_gbps_per_gpu:g} GB/s per GPU (given)"
        else:
            plan = ctx.training
            if isinstance(plan, UserError):
                return
            tb = bytes_per_token(ctx.model.vocab, facility_limits())
            need = plan.best.tokens_per_s * tb / 1e9
            basis = f"{plan.best.tokens_per_s:,.0f} tokens/s x {tb:g} bytes per token id ({ctx.model_note})"
        link, link_text = node_storage_gbps(ctx.pool)
        tier = max(shared, key=lambda t: t.read_gbps)
        supply = min(tier.read_gbps, ctx.job_nodes * link)
        if need <= 0.5 * supply:
            return
        yield Finding(
            self.id, "error" if need > supply else "warning",
            f"{gpus} GPUs read {need:.1f} GB/s of input; {tier.name} ({tier.kind}) delivers {supply:.1f} GB/s "
            f"to {ctx.job_nodes} nodes",
            "stage the data set on local NVMe before training (seed 1: 'Everything must be in the hot tier before "
            "training starts') or a parallel file system with more read bandwidth",
            {"need_gbps": round(need, 3), "basis": basis, "tier": tier.name, "tier_read_gbps": tier.read_gbps,
             "node_links_gbps": round(ctx.job_nodes * link, 1), "node_link": link_text},
            ctx.at("storage", ctx.spec.storage.index(tier), "read_gbps"))
