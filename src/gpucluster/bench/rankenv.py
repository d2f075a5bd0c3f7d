"""Who am I in a distributed run: torchrun's environment, Slurm's srun, or our own local launcher
(which sets the torchrun variables)."""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from collections.abc import Mapping

from gpucluster.errors import UserError


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    node: str             # what groups ranks into nodes: node rank, Slurm node id or host name
    master_addr: str
    master_port: int
    launcher: str         # torchrun, srun or local

    def export(self) -> None:
        """torch.distributed's env:// rendezvous reads these."""
        os.environ.update({"RANK": str(self.rank), "WORLD_SIZE": str(self.world_size),
                           "LOCAL_RANK": str(self.local_rank), "MASTER_ADDR": self.master_addr,
                           "MASTER_PORT": str(self.master_port)})


def _first_host(nodelist: str) -> str:
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                             timeout=10, check=True).stdout.split()
        return out[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        raise UserError(f"cannot expand SLURM_JOB_NODELIST {nodelist!r} with scontrol; set MASTER_ADDR") from None


def detect(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank's place in the job, or None outside torchrun/srun/local launcher."""
    e = os.environ if env is None else env
    host = e.get("GPUCLUSTER_NODE") or socket.gethostname()
    if "RANK" in e and "WORLD_SIZE" in e:
        node = e.get("GPUCLUSTER_NODE") or (f"node{e['GROUP_RANK']}" if "GROUP_RANK" in e else host)
        return RankEnv(int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", 0)), node,
                       e.get("MASTER_ADDR", "127.0.0.1"), int(e.get("MASTER_PORT", 29500)),
                       e.get("GPUCLUSTER_LAUNCHER", "torchrun"))
    if "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
        addr = e.get("MASTER_ADDR") or _first_host(e.get("SLURM_JOB_NODELIST", e.get("SLURM_NODELIST", "")))
        port = int(e.get("MASTER_PORT", 29500 + int(e.get("SLURM_JOB_ID", "0")) % 1000))
        node = e.get("GPUCLUSTER_NODE") or e.get("SLURMD_NODENAME") or f"node{e.get('SLURM_NODEID', 0)}"
        return RankEnv(int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"]), int(e.get("SLURM_LOCALID", 0)), node,
                       addr, port, "srun")
    return None
