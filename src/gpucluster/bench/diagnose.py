"""Measured against expected: for each benchmark result, the tier it crossed (inside a node or
across nodes), the busbw the model expects on that cluster spec at the same sizes, and the
bottleneck named with numbers when a tier delivers less than it should.

The comparison uses the bandwidth regime (the largest sizes, >= 1 MiB, at most the top three),
where a collective's time is bytes over the slowest link; below it latency dominates and a
shortfall says little about the wires."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from gpucluster.errors import UserError

THRESHOLD = 0.7          # below 70% of what the spec gives: the tier is the bottleneck
MIN_BW_SIZE = 1 << 20
HINTS = {
    "scale-out": "check NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME, NIC link speed (ethtool, ibstat), switch port "
                 "speeds and any rate limit (tc) on the path",
    "scale-up": "check nvidia-smi topo -m and nvidia-smi nvlink --status (a PCIe fallback), NCCL_P2P_DISABLE, "
                "NCCL_NVLS_ENABLE",
}


@dataclass
class TierFinding:
    tier: str                 # scale-up or scale-out
    where: str                # "inside a node" / "across nodes"
    link: str                 # what carries it, from the spec
    source: str               # the result it came from
    op: str
    ranks: int
    nodes: int
    sizes: list[int]
    measured_gbps: list[float]
    expected_gbps: list[float]
    ratio: float              # median measured / expected in the bandwidth regime
    bottleneck: bool
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> float:
        """At the largest size (where bandwidth dominates most)."""
        return self.measured_gbps[-1]

    @property
    def expected(self) -> float:
        return self.expected_gbps[-1]

    def sentence(self) -> str:
        head = (f"{self.where} busbw {_g(self.measured)} GB/s where the spec gives {_g(self.expected)}: "
                f"the {'scale-out network' if self.tier == 'scale-out' else 'scale-up link'} ({self.link}) "
                f"delivers {self.ratio:.0%}")
        return head + (f"; {HINTS[self.tier]}" if self.bottleneck else "")

    def to_json(self) -> dict:
        return {"tier": self.tier, "where": self.where, "link": self.link, "source": self.source, "op": self.op,
                "ranks": self.ranks, "nodes": self.nodes, "sizes": self.sizes,
                "measured_busbw_gbps": self.measured_gbps, "expected_busbw_gbps": self.expected_gbps,
                "ratio": self.ratio, "bottleneck": self.bottleneck, "text": self.sentence(), "notes": self.notes}


def _g(x: float) -> str:
    return f"{x:.3g}"


def _group(spec, pool, ranks: int, per_node: int):
    """The measured group placed on the spec: `per_node` ranks on each of ranks/per_node nodes,
    sharing their node's NICs."""
    from gpucluster.model.placement import place_group
    from gpucluster.model.topology import link_gbit, scale_out_view

    view = scale_out_view(spec, pool.name)
    per_node = min(per_node, pool.gpus_per_node)
    nic_per_rank = pool.nics_per_node * link_gbit(spec, pool) / 8 / per_node
    return place_group(pool.gpu_entry, ranks, per_node, domain_size=min(view.domain_size, per_node),
                       scale_out_link=view.scale_out_link, scale_out_gbps_per_gpu=nic_per_rank,
                       oversubscription=view.oversubscription, nodes_per_leaf=view.nodes_per_leaf)


def diagnose_result(spec, result: dict, source: str, pool_name: str | None = None,
                    threshold: float = THRESHOLD) -> TierFinding:
    from gpucluster.model.collectives import predict

    if result.get("schema") != "gpucluster-bench-collective/v1":
        raise UserError("not a `gpucluster bench collective --json` result", file=source)
    pool = spec.pool(pool_name) if pool_name else spec.node_pools[0]
    ranks, nodes = int(result["world_size"]), int(result["nodes"])
    if ranks < 2:
        raise UserError("a one-rank run crosses no link: nothing to diagnose", file=source)
    per_node = ranks // nodes
    if nodes > pool.count:
        raise UserError(f"the run used {nodes} nodes; pool {pool.name!r} has {pool.count}", file=source)
    group = _group(spec, pool, ranks, per_node)
    rows = [r for r in result["rows"] if r["size_bytes"] > 0]
    big = [r for r in rows if r["size_bytes"] >= MIN_BW_SIZE][-3:] or rows[-1:]
    sizes = [r["size_bytes"] for r in big]
    pred = predict(result["op"], [float(s) for s in sizes], group)
    expected = [float(x) for x in pred.busbw_gbps]
    measured = [float(r["busbw_gbps"]) for r in big]
    ratio = statistics.median(m / e for m, e in zip(measured, expected) if e > 0) if any(expected) else 0.0
    if nodes > 1:
        tier, where = "scale-out", "across nodes"
        link = f"{pool.nics_per_node} x {pool.nic} per node, {group.scale_out.link.name}"
        names = sorted(result.get("node_ranks", {}))
        if names:
            link += f", between {', '.join(names)}"
    else:
        tier, where, link = "scale-up", "inside a node", f"{group.scale_up.link.name}"
    notes = []
    if result.get("backend") == "gloo" and tier == "scale-up":
        notes.append("gloo runs on the CPU: inside a node it measures host memory copies, not the GPUs' links")
    if result.get("wrong_total"):
        notes.append(f"{result['wrong_total']} wrong values: results are not trustworthy")
    return TierFinding(tier, where, link, source, result["op"], ranks, nodes, sizes, measured, expected,
                       ratio, ratio < threshold, notes)


def diagnose(spec_path: str, results: list[tuple[str, dict]], pool: str | None = None,
             threshold: float = THRESHOLD) -> list[TierFinding]:
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(spec_path)
    return [diagnose_result(spec, r, src, pool, threshold) for src, r in results]
