"""Place a group of GPUs on a fabric: from catalog entries to a `CommGroup`."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.models import Gpu
from gpucluster.model.collectives import CommGroup
from gpucluster.model.training.fabric import TrainingFabric

SCALE_OUT_LINK = {"infiniband": "InfiniBand", "roce": "RoCE", "ethernet": "Ethernet"}


def nic_gbps_per_gpu(line_rate_gbit: float, nics_per_node: int, gpus_per_node: int) -> float:
    """GB/s per direction that one GPU gets from its node's NICs (Gbit/s / 8)."""
    return line_rate_gbit * nics_per_node / 8 / gpus_per_node


def place_group(gpu: Gpu, gpus: int, gpus_per_node: int, *, domain_size: int | None = None,
                scale_out_link: str | None = None, scale_out_gbps_per_gpu: float | None = None,
                oversubscription: float = 1.0, nodes_per_leaf: int | None = None) -> CommGroup:
    """`gpus` consecutive GPUs packed densely: whole scale-up domains first, as schedulers place them.

    domain_size is the NVLink domain (default gpus_per_node; 72 for GB200 NVL72)."""
    fabric = TrainingFabric(gpu.name, gpus_per_node, domain_size or gpus_per_node, scale_out_link,
                            scale_out_gbps_per_gpu, oversubscription, nodes_per_leaf)
    return fabric.group(gpus, 1)


@dataclass(frozen=True)
class Placed:
    """A communication group and the facts about the fabric it was built from."""
    group: CommGroup
    gpu: str
    gpus_per_node: int
    nic: str | None
    nics_per_node: int
    source: str  # cluster file and pool, or "command line"

    def describe(self) -> dict:
        g = self.group
        return {"source": self.source, "gpu": self.gpu, "gpus": g.gpus, "gpus_per_node": self.gpus_per_node,
                "gpus_per_domain": g.per_domain, "domains": g.domains,
                "scale_up": {"link": g.scale_up.link.name, "gbps_per_direction": g.scale_up_gbps,
                             "in_switch_reduction": g.in_switch_reduction},
                "scale_out": None if g.scale_out is None else {
                    "nic": self.nic, "nics_per_node": self.nics_per_node, "link": g.scale_out.link.name,
                    "gbps_per_gpu_per_direction": g.scale_out.gbps_per_direction,
                    "oversubscription": g.oversubscription}}

    def describe_lines(self) -> list[str]:
        g = self.group
        lines = [f"{g.gpus} x {self.gpu} ({self.source}): {g.domains} scale-up domain(s) of {g.per_domain} GPUs",
                 f"scale-up : {g.scale_up.link.name}, {g.scale_up_gbps:g} GB/s per GPU per direction"
                 + (", NVLS in-switch reduction" if g.in_switch_reduction else "")]
        if g.scale_out is not None:
            lines.append(f"scale-out: {self.nics_per_node} x {self.nic} per node ({g.scale_out.link.name}), "
                         f"{g.scale_out.gbps_per_direction:g} GB/s per GPU per direction"
                         + (f", {g.oversubscription:g}:1 oversubscribed" if g.oversubscription > 1 else ""))
        return lines
