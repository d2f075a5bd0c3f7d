"""Measured against expected: for each benchmark result, the tier it crossed (inside a node or
across nodes), the busbw the model expects on that cluster spec at the same sizes, and the
bottleneck named with numbers when a tier delivers less than it should.

The comparison uses the bandwidth regime (the largest sizes, >= 1 MiB, at most the top three),
where a collective's time is bytes over the slowest link; below it latency dominates and a
shortfall says little about the wires.

Gloo runs on the CPU. Inside one node it measures host memory copies, not the GPUs' links, so
such a run is not judged. Across nodes a busy or slow host can cap it below the network: the
result then carries a same-run baseline (the same collective between two ranks on one host over
loopback, measured right after the run, `bench/worker.py`), and the expectation becomes the
lower of the spec and that baseline. The network is named only when the measurement falls below
the threshold of that adjusted expectation; a run that the host caps is reported as host-bound."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from gpucluster.bench.result import CollectiveResult, read_collective
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
    expected_gbps: list[float]     # what the spec gives
    ratio: float              # median measured / spec in the bandwidth regime
    bottleneck: bool
    notes: list[str] = field(default_factory=list)
    baseline_gbps: list[float] | None = None   # same-run host baseline at the same sizes (gloo across nodes)
    judged: bool = True       # False: the run cannot say anything about this tier (gloo inside a node)

    @property
    def measured(self) -> float:
        """At the largest size (where bandwidth dominates most)."""
        return self.measured_gbps[-1]

    @property
    def expected(self) -> float:
        return self.expected_gbps[-1]

    @property
    def compared_gbps(self) -> list[float]:
        """What the measurement is held against: the spec, or the baseline where that is lower."""
        if not self.baseline_gbps:
            return self.expected_gbps
        return [min(e, b) for e, b in zip(self.expected_gbps, self.baseline_gbps, strict=True)]

    @property
    def judged_ratio(self) -> float:
        """Median measured / compared: the figure the verdict rests on."""
        return _median_ratio(self.measured_gbps, self.compared_gbps)

    @property
    def host_bound(self) -> bool:
        """The same-run baseline is below the spec: the host, not the network, sets the ceiling."""
        return bool(self.baseline_gbps) and _median_ratio(self.baseline_gbps or [], self.expected_gbps) < 1.0

    def compared_text(self) -> str:
        base = (f"the spec ({_g(self.expected)} GB/s at {self.sizes[-1]} B)" if not self.baseline_gbps else
                f"the lower of the spec ({_g(self.expected)} GB/s) and this host's same-run loopback baseline "
                f"({_g(self.baseline_gbps[-1])} GB/s) at {self.sizes[-1]} B")
        return f"median of measured / {base} over {len(self.sizes)} size(s)"

    def sentence(self) -> str:
        net = 'scale-out network' if self.tier == 'scale-out' else 'scale-up link'
        if not self.judged:
            return (f"{self.where} busbw {_g(self.measured)} GB/s where the spec gives {_g(self.expected)}: not "
                    f"judged, the run does not cross the {net} ({self.link})")
        if not self.baseline_gbps:
            head = (f"{self.where} busbw {_g(self.measured)} GB/s where the spec gives {_g(self.expected)}: "
                    f"the {net} ({self.link}) delivers {self.ratio:.0%}")
            return head + (f"; {HINTS[self.tier]}" if self.bottleneck else "")
        base = self.baseline_gbps[-1]
        head = (f"{self.where} busbw {_g(self.measured)} GB/s where the spec gives {_g(self.expected)} and this host "
                f"reaches {_g(base)} over loopback in the same run")
        if self.bottleneck:
            return (f"{head}: the {net} ({self.link}) delivers {self.judged_ratio:.0%} of the lower of the two; "
                    f"{HINTS[self.tier]}")
        if self.host_bound:
            return (f"{head}: host-bound (the CPU caps gloo below the spec); the {net} ({self.link}) delivers "
                    f"{self.judged_ratio:.0%} of what the host allows, not a network bottleneck")
        return f"{head}: the {net} ({self.link}) delivers {self.judged_ratio:.0%} of the spec"

    def to_json(self) -> dict:
        return {"tier": self.tier, "where": self.where, "link": self.link, "source": self.source, "op": self.op,
                "ranks": self.ranks, "nodes": self.nodes, "sizes": self.sizes,
                "measured_busbw_gbps": self.measured_gbps, "expected_busbw_gbps": self.expected_gbps,
                "baseline_busbw_gbps": self.baseline_gbps, "compared_busbw_gbps": self.compared_gbps,
                "compared": self.compared_text(), "ratio": self.ratio, "judged_ratio": self.judged_ratio,
                "judged": self.judged, "host_bound": self.host_bound, "bottleneck": self.bottleneck,
                "text": self.sentence(), "notes": self.notes}


def _g(x: float) -> str:
    return f"{x:.3g}"


def _median_ratio(num: list[float], den: list[float]) -> float:
    pairs = [n / d for n, d in zip(num, den, strict=True) if d > 0]
    return statistics.median(pairs) if pairs else 0.0


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


def _baseline_at(res: CollectiveResult, sizes: list[int]) -> list[float] | None:
    """The baseline's busbw at each size (the nearest size it measured); None without one."""
    b = res.baseline
    if b is None or not b.rows:
        return None
    return [min(b.rows, key=lambda r: abs(r.size_bytes - s)).busbw_gbps for s in sizes]


def diagnose_result(spec, result: dict, source: str, pool_name: str | None = None,
                    threshold: float = THRESHOLD) -> TierFinding:
    import numpy as np  # predict's own dependency: loaded with it, so no cost at start-up

    from gpucluster.model.collectives import predict

    res = read_collective(result, source)
    pool = spec.pool(pool_name) if pool_name else spec.node_pools[0]
    ranks, nodes = res.world_size, res.nodes
    if ranks < 2:
        raise UserError("a one-rank run crosses no link: nothing to diagnose", file=source)
    per_node = ranks // nodes
    if nodes > pool.count:
        raise UserError(f"the run used {nodes} nodes; pool {pool.name!r} has {pool.count}", file=source)
    group = _group(spec, pool, ranks, per_node)
    rows = [r for r in res.rows if r.size_bytes > 0]
    if not rows:
        raise UserError("no row with a size above 0 B", file=source, field="rows")
    big = [r for r in rows if r.size_bytes >= MIN_BW_SIZE][-3:] or rows[-1:]
    sizes = [r.size_bytes for r in big]
    pred = predict(res.op, [float(s) for s in sizes], group)
    expected = [float(x) for x in np.atleast_1d(pred.busbw_gbps)]
    measured = [float(r.busbw_gbps) for r in big]
    ratio = _median_ratio(measured, expected)
    if nodes > 1:
        tier, where = "scale-out", "across nodes"
        link = f"{pool.nics_per_node} x {pool.nic} per node, {group.scale_out.link.name}"
        names = sorted(res.node_ranks)
        if names:
            link += f", between {', '.join(names)}"
    else:
        tier, where, link = "scale-up", "inside a node", f"{group.scale_up.link.name}"
    gloo = res.backend == "gloo"
    notes: list[str] = []
    baseline = _baseline_at(res, sizes) if gloo and tier == "scale-out" else None
    finding = TierFinding(tier, where, link, source, res.op, ranks, nodes, sizes, measured, expected, ratio, False,
                          notes, baseline, judged=not (gloo and tier == "scale-up"))
    if not finding.judged:
        notes.append("gloo runs on the CPU: inside a node it measures host memory copies, not the GPUs' links; "
                     "not judged against the scale-up tier")
    elif gloo and tier == "scale-out":
        if baseline and res.baseline:
            notes.append(f"compared: {finding.compared_text()}; baseline: {res.baseline.what}")
        else:
            why = f" ({res.baseline.error})" if res.baseline and res.baseline.error else ""
            notes.append("no same-run host baseline in this result" + why + ": gloo on a busy host can look like a "
                         "slow network; re-run `gpucluster bench collective` (it measures one across nodes)")
    if res.wrong_total:
        notes.append(f"{res.wrong_total} wrong values: results are not trustworthy")
    finding.bottleneck = finding.judged and finding.judged_ratio < threshold
    return finding


def diagnose(spec_path: str, results: list[tuple[str, dict]], pool: str | None = None,
             threshold: float = THRESHOLD) -> list[TierFinding]:
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(spec_path)
    return [diagnose_result(spec, r, src, pool, threshold) for src, r in results]
