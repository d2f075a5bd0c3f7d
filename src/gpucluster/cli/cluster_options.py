"""The cluster a command runs on: a cluster YAML, or the same `--gpu/--nodes/--nic/--nics-per-node`
options as `plan train` (`check`, `topology`, `cost`, `facility`, `reliability`, `init`).

From options, the cluster is `--nodes` nodes of `--gpu TYPE:COUNT`, `--nics-per-node` x `--nic`
per node (default one per GPU), on a non-blocking fabric of the catalog's smallest switch that
carries the NIC's ports (`--switch` to choose): one switch when it has ports enough, else a fat
tree. The host parts the options do not set (CPU, cores, RAM, local NVMe) are seed 1's
AI-Training-NG8 node, as `advise` costs a cluster (plan/decide.py NODE_PARTS), and its NVMe is
the one storage tier (NODE_NVME); `gpucluster init` writes them into the file, marked, for you
to edit. No facility section: the commands that need one say what they assume, as for a file
without it."""

from __future__ import annotations

import atexit
import math
import shutil
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from gpucluster.specs.cluster import ClusterSpec

DEFAULT_NIC = "NDR400"        # plan train's default
# The node's own NVMe (NODE_PARTS' local_nvme_tb), as examples/ng8-32node.yaml gives seed 1's hot
# tier: 61.44 TB and 2 ms are the seed's; read and write GB/s are that file's estimates (4 U.2 drives).
NODE_NVME = {"kind": "local-nvme", "name": "node-nvme", "capacity_tb": 61.44, "read_gbps": 28.0, "write_gbps": 15.0,
             "latency_ms": 2.0}
MAX_NODES = 1_000_000         # a node pool's own bound (specs/cluster.py NodePool.count)

GpuOpt = Annotated[Optional[str], typer.Option(
    "--gpu", help="Without a cluster file: GPU type and count per node, e.g. H100:8")]
NodesOpt = Annotated[Optional[int], typer.Option(
    "--nodes", help="Without a cluster file: nodes in the cluster (default 1)")]
NicOpt = Annotated[str, typer.Option(
    "--nic", help="Without a cluster file: NIC, e.g. NDR400, RoCE-400G, Ethernet-100G")]
NicsOpt = Annotated[Optional[int], typer.Option(
    "--nics-per-node", help="Without a cluster file: NICs per node (default: one per GPU)")]
SwitchOpt = Annotated[Optional[str], typer.Option(
    "--switch", help="Without a cluster file: fabric switch (default: the catalog's smallest that carries the NIC)")]


@dataclass(frozen=True)
class ClusterChoice:
    spec: ClusterSpec
    path: str | None          # the YAML it came from; None when built from options
    source: str               # for messages: the path, or the options


def flags_given(gpu: str | None, nodes: int | None, nics_per_node: int | None, nic: str = DEFAULT_NIC,
                switch: str | None = None) -> bool:
    return gpu is not None or nodes is not None or nics_per_node is not None or nic != DEFAULT_NIC \
        or switch is not None


def spec_from_options(gpu: str, nodes: int | None = None, nic: str = DEFAULT_NIC, nics_per_node: int | None = None,
                      switch: str | None = None, name: str | None = None) -> ClusterSpec:
    """The cluster the options describe (see the module's docstring for what they leave out)."""
    from pydantic import ValidationError

    from gpucluster.catalog import catalog, parse_accelerator
    from gpucluster.errors import UserError
    from gpucluster.plan.decide import NODE_PARTS, _switch_for
    from gpucluster.specs.cluster import ClusterSpec

    entry, per_node = parse_accelerator(gpu, field="--gpu")
    n = 1 if nodes is None else nodes
    if not 1 <= n <= MAX_NODES:
        raise UserError(f"must be from 1 to {MAX_NODES:,}, got {n}", field="--nodes")
    nic_entry = catalog.nics.get(nic, field="--nic")
    nics = per_node if nics_per_node is None else nics_per_node
    if not 1 <= nics <= 1024:
        raise UserError(f"must be from 1 to 1,024, got {nics}", field="--nics-per-node")
    sw = catalog.switches.get(switch, field="--switch").name if switch else _switch_for(nic_entry.name)
    radix = catalog.switches.get(sw).radix.value
    data = {
        "name": name or f"{n}x{entry.name}:{per_node}-{nic_entry.name}",
        "description": f"{n} nodes x {per_node} {entry.name}, {nics} x {nic_entry.name} per node "
                       f"(written from options; host parts: seed 1's AI-Training-NG8 node)",
        "node_pools": [{"name": "gpu", "count": n, "gpu": entry.name, "gpus_per_node": per_node,
                        "nics_per_node": nics, "nic": nic_entry.name, **NODE_PARTS}],
        "fabric": {"topology": "single-switch" if n * nics <= radix else "fat-tree", "switch": sw},
        "storage": [NODE_NVME],
    }
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(str(err.get("msg", exc))[:200], field=".".join(str(x) for x in err.get("loc", ()))) from None


def resolve(cluster: str | None, gpu: str | None, nodes: int | None, nic: str = DEFAULT_NIC,
            nics_per_node: int | None = None, switch: str | None = None, *, nodes_with_file: bool = False
            ) -> ClusterChoice:
    """A cluster file, or the options; both is an error (which one would you mean?), and so is
    neither. `nodes_with_file`: the command reads `--nodes` itself with a file (reliability's
    job size), so it is not an option of the cluster there."""
    from gpucluster.errors import UserError
    from gpucluster.specs.cluster import load_cluster

    if cluster is not None:
        extra = [o for o, given in (("--gpu", gpu is not None), ("--nodes", nodes is not None and not nodes_with_file),
                                    ("--nic", nic != DEFAULT_NIC), ("--nics-per-node", nics_per_node is not None),
                                    ("--switch", switch is not None)) if given]
        if extra:
            verb = "describe" if len(extra) > 1 else "describes"
            raise UserError(f"{', '.join(extra)} {verb} a cluster without a file; give the cluster file or the "
                            f"options, not both", field=extra[0])
        return ClusterChoice(load_cluster(cluster), cluster, cluster)
    if gpu is None:
        if flags_given(gpu, nodes, nics_per_node, nic, switch):
            raise UserError("give --gpu TYPE:COUNT with the other cluster options, e.g. --gpu H100:8 --nodes 8",
                            field="--gpu")
        raise UserError("give a cluster file, or --gpu TYPE:COUNT (with --nodes N, --nic NAME), "
                        "e.g. --gpu H100:8 --nodes 8 --nic NDR400")
    spec = spec_from_options(gpu, nodes, nic, nics_per_node, switch)
    p = spec.node_pools[0]
    return ClusterChoice(spec, None, f"--gpu {p.gpu}:{p.gpus_per_node} --nodes {p.count} --nic {p.nic} "
                                     f"--nics-per-node {p.nics_per_node}")


_TMP: list[str] = []


def path_of(choice: ClusterChoice) -> str:
    """A path to the cluster's YAML, for the code that reads a file: the user's file, or the
    options' cluster written (as `gpucluster init` writes it) to a folder removed at exit."""
    if choice.path is not None:
        return choice.path
    from gpucluster.specs.cluster import dump_cluster
    if not _TMP:
        _TMP.append(tempfile.mkdtemp(prefix="gpucluster-"))
        atexit.register(shutil.rmtree, _TMP[0], True)
    path = f"{_TMP[0]}/cluster-from-options.yaml"
    with open(path, "w", encoding="utf-8") as f:
        f.write(dump_cluster(choice.spec))
    return path


def finite_in(value: float | None, field: str, lo: float, hi: float = math.inf, *, lo_open: bool = False
              ) -> float | None:
    """`value` (None passes) must be a finite number in [lo, hi] ((lo, hi] with lo_open); else one
    line naming the option and its range (NaN and inf fail every comparison or the finite test)."""
    from gpucluster.errors import UserError
    if value is None:
        return None
    ok = math.isfinite(value) and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        low = f"> {lo:g}" if lo_open else f">= {lo:g}"
        rng = low if hi == math.inf else f"{low} and <= {hi:g}"
        raise UserError(f"must be a finite number {rng}, got {value}", field=field)
    return value
