"""Where a training job's parallel groups land on the fabric, and what their collectives cost.

A group of `size` GPUs whose ranks are `stride` apart (Megatron rank order, see
layout.py) has min(size, domain // stride) members in each scale-up domain: a
TP group (stride 1) of 8 fills an 8-GPU NVLink domain, a DP group with
tp x cp = 8 puts one GPU in each domain and crosses the network on every
GPU's own rail.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpucluster.catalog import catalog
from gpucluster.catalog.models import Gpu
from gpucluster.model.collectives import CommGroup, Tier, predict_time_s


@dataclass(frozen=True)
class TrainingFabric:
    gpu_name: str
    gpus_per_node: int
    domain: int                          # GPUs per scale-up (NVLink) domain
    scale_out_link: str | None = None    # link technology of the NICs
    nic_gbps_per_gpu: float | None = None  # GB/s per GPU per direction
    oversubscription: float = 1.0
    nodes_per_leaf: int | None = None
    nic_name: str | None = None

    @property
    def gpu(self) -> Gpu:
        return _gpu(self.gpu_name)

    def describe(self) -> str:
        net = "no scale-out network" if self.scale_out_link is None else (
            f"{self.nic_name or self.scale_out_link}: {self.nic_gbps_per_gpu:g} GB/s per GPU"
            + (f", {self.oversubscription:g}:1" if self.oversubscription > 1 else ""))
        return f"{self.gpu_name} x {self.gpus_per_node} per node, NVLink domain {self.domain}, {net}"

    def job_fields(self) -> dict:
        """What job generators need (gpucluster generate reads them from the plan JSON)."""
        return {"gpu": self.gpu_name, "gpus_per_node": self.gpus_per_node, "nic": self.nic_name,
                "scale_out_link": self.scale_out_link}

    def per_domain(self, size: int, stride: int) -> int:
        if stride >= self.domain:
            return 1
        inside = min(size, self.domain // stride)
        while size % inside:
            inside -= 1
        return max(inside, 1)

    def group(self, size: int, stride: int) -> CommGroup:
        """The placed group of `size` GPUs `stride` ranks apart (the same object for the same
        question: a planner asks for thousands of collectives over a handful of groups)."""
        return _group(self, size, stride)

    def _group(self, size: int, stride: int) -> CommGroup:
        gpu = self.gpu
        per = self.per_domain(size, stride)
        up = Tier(catalog.links.get(gpu.scale_up.link), gpu.scale_up.bandwidth_gbps_per_direction.value)
        out = None
        if self.scale_out_link is not None and self.nic_gbps_per_gpu:
            out = Tier(catalog.links.get(self.scale_out_link), self.nic_gbps_per_gpu)
        # Oversubscription slows only traffic that leaves a leaf switch (any node when unknown).
        nodes_spanned = max(1, size * stride // self.gpus_per_node)
        over = self.oversubscription if nodes_spanned > (self.nodes_per_leaf or 1) else 1.0
        if size // per > 1 and out is None:
            raise ValueError(f"a group of {size} GPUs spans {size // per} NVLink domains but the cluster "
                             "has no scale-out network")
        # NVLS needs the NVSwitch domain the catalog describes: a node with fewer of these GPUs is a
        # 4-GPU board wired point to point, or a VM's slice of a board, and runs rings.
        nvls = gpu.scale_up.in_switch_reduction and self.domain >= gpu.domain_size
        return CommGroup(gpus=size, per_domain=per, scale_up=up, scale_out=out,
                         domain_size=max(self.domain, per), switched=gpu.scale_up.switched,
                         in_switch_reduction=nvls, oversubscription=over)

    def time_s(self, op: str, size_bytes: float, size: int, stride: int) -> float:
        """Seconds of one collective over a group; 0 for a group of one."""
        if size <= 1 or size_bytes <= 0:
            return 0.0
        return _cached_time(self, op, float(size_bytes), size, stride)

    def send_recv_s(self, size_bytes: float, stride: int) -> float:
        """Point-to-point between two GPUs `stride` ranks apart (pipeline neighbours)."""
        if size_bytes <= 0:
            return 0.0
        return _cached_time(self, "send_recv", float(size_bytes), 2, stride)


@lru_cache(maxsize=65536)
def _cached_time(fabric: TrainingFabric, op: str, size_bytes: float, size: int, stride: int) -> float:
    if op == "send_recv":
        group = fabric.group(2, stride) if stride < fabric.domain else fabric.group(2, fabric.domain)
    else:
        group = fabric.group(size, stride)
    return predict_time_s(op, size_bytes, group)


@lru_cache(maxsize=256)
def _gpu(name: str) -> Gpu:
    """The catalog entry of a GPU (asked for several times per estimate in a layout search)."""
    return catalog.gpus.get(name)


@lru_cache(maxsize=4096)
def _group(fabric: TrainingFabric, size: int, stride: int) -> CommGroup:
    return fabric._group(size, stride)
