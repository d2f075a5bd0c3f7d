"""Checkpoint size and write/read time on a cluster's storage tiers.

Size: a training checkpoint holds the weights and the optimizer state, not the
gradients (Megatron-LM and DeepSpeed save both; gradients are rebuilt in the next
step). Mixed-precision Adam: 2 bytes of bf16/fp16 weights + 12 bytes of fp32 master
weights, momentum and variance per parameter (ZeRO paper, section 3.1) = 14 bytes;
fp32 training: 4 + 8. Checks: BLOOM-176B, 176e9 x 14 B = 2.46e12 B = 2.24 TiB, which
the BigScience chronicles call "2.3 TB"; a 70B model is 0.99 TB.

Time: the state is sharded over all ranks (ZeRO-1 / distributed optimizer, Megatron
distributed checkpointing), so every node writes size / nodes at once.
- local NVMe (tier figures are per node): size / nodes / write_gbps. It survives a
  process crash but not the node, so it is copied asynchronously to a shared tier; the
  checkpoint is durable only after that copy, which therefore adds to the work lost
  per failure (conservatively: every failure is taken to need the shared copy) and
  bounds the interval from below (a copy must finish before the next one starts).
- shared tiers (parallel-fs, nfs, object; figures are totals for the cluster):
  size / min(tier write_gbps, nodes x the node's storage link).
The node's storage link is its storage NICs when it has them, else its compute NICs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucluster.model.transformer_memory import Precision, weight_grad_optimizer_bytes

if TYPE_CHECKING:
    from gpucluster.specs.cluster import ClusterSpec, NodePool, StorageTier
    from gpucluster.specs.workload import TransformerSpec

SHARED_KINDS = ("parallel-fs", "nfs", "object")


@dataclass(frozen=True)
class CheckpointSize:
    weights_bytes: float
    optimizer_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.optimizer_bytes


# Training precision -> the precision of the weights a checkpoint stores (FP8 training keeps BF16 weights).
_STORED: dict[str, Precision] = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "bf16"}


def checkpoint_size(spec: TransformerSpec, precision: str = "bf16") -> CheckpointSize:
    """Weights and optimizer state of the whole model (unsharded count), bytes."""
    stored = _STORED.get(precision)
    if stored is None:
        raise ValueError(f"precision must be fp32, fp16, bf16 or fp8, got {precision!r}")
    b = weight_grad_optimizer_bytes(spec, precision=stored)
    return CheckpointSize(b["weights"], b["optimizer"])


def node_storage_gbps(pool: NodePool) -> tuple[float, str]:
    """GB/s one node can push to shared storage, and what limits it."""
    if pool.storage_nic is not None:
        nic = pool.storage_nic
        from gpucluster.catalog import catalog
        rate = catalog.nics.get(nic.nic).line_rate_gbit.value
        return nic.count * rate / 8, f"{nic.count} x {nic.nic} storage NICs"
    rate = pool.nic_entry.line_rate_gbit.value
    return pool.nics_per_node * rate / 8, f"{pool.nics_per_node} x {pool.nic} compute NICs (no storage NICs)"


def transfer_s(size_bytes: float, tier: StorageTier, nodes: int, node_gbps: float, *,
               write: bool = True) -> tuple[float, str]:
    """Seconds to write (or read) `size_bytes` spread over `nodes` nodes, and the limit."""
    rate = tier.write_gbps if write else tier.read_gbps
    verb = "write" if write else "read"
    if tier.kind == "local-nvme":
        return size_bytes / nodes / (rate * 1e9), f"{tier.name} {verb} {rate:g} GB/s per node x {nodes} nodes"
    if nodes * node_gbps < rate:
        return size_bytes / (nodes * node_gbps * 1e9), f"{nodes} nodes x {node_gbps:g} GB/s node links"
    return size_bytes / (rate * 1e9), f"{tier.name} {verb} {rate:g} GB/s aggregate"


@dataclass(frozen=True)
class CheckpointOption:
    """Where checkpoints go and how long they take (seconds)."""
    name: str            # tier name, or "nvme -> lustre" for local then async copy
    delta_s: float       # blocks training
    copy_s: float        # async copy to a durable tier (0: written durably)
    read_s: float        # reading it back on restart
    durable: bool        # survives the loss of a node
    limit: str           # what bounds delta


def checkpoint_options(spec: ClusterSpec, size_bytes: float, nodes: int, pool: str | None = None
                       ) -> list[CheckpointOption]:
    """Every way to checkpoint on the spec's storage: each shared tier directly, and each
    local-NVMe tier followed by an async copy to the fastest-writing shared tier."""
    p = spec.pool(pool) if pool else spec.node_pools[0]
    link, _ = node_storage_gbps(p)
    shared = [t for t in spec.storage if t.kind in SHARED_KINDS]
    out: list[CheckpointOption] = []
    for t in shared:
        w, why = transfer_s(size_bytes, t, nodes, link, write=True)
        r, _ = transfer_s(size_bytes, t, nodes, link, write=False)
        out.append(CheckpointOption(t.name, w, 0.0, r, True, why))
    best_shared = max(shared, key=lambda t: min(t.write_gbps, nodes * link), default=None)
    for t in spec.storage:
        if t.kind != "local-nvme":
            continue
        w, why = transfer_s(size_bytes, t, nodes, link, write=True)
        if best_shared is None:
            out.append(CheckpointOption(t.name, w, 0.0, transfer_s(size_bytes, t, nodes, link, write=False)[0],
                                        False, why))
            continue
        c, _ = transfer_s(size_bytes, best_shared, nodes, link, write=True)
        r, _ = transfer_s(size_bytes, best_shared, nodes, link, write=False)
        out.append(CheckpointOption(f"{t.name} -> {best_shared.name}", w, c, r, True, why))
    return out
