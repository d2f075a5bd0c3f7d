"""Turn command-line options or a cluster spec into a placed communication group."""

from __future__ import annotations

from gpucluster.catalog import catalog, parse_accelerator
from gpucluster.errors import UserError
from gpucluster.model.placement import Placed, nic_gbps_per_gpu, place_group


def _check_group_size(gpus: int | None, available: int, per_node: int, where: str) -> int:
    n = gpus if gpus is not None else per_node
    if n < 1:
        raise UserError(f"must be >= 1, got {n}", field="--gpus")
    if n > available:
        raise UserError(f"{n} GPUs requested but {where} has {available}", field="--gpus")
    if n > per_node and n % per_node:
        raise UserError(f"{n} GPUs do not fill whole nodes of {per_node}; use a multiple of {per_node}",
                        field="--gpus")
    return n


def group_from_cli(accelerator: str, nic: str, nics_per_node: int | None, gpus: int | None) -> Placed:
    """`--gpu H100:8 --nic NDR400 --gpus 64`: as many nodes as the group needs, one NIC per GPU."""
    gpu, per_node = parse_accelerator(accelerator, field="--gpu")
    n = _check_group_size(gpus, 10**9, per_node, "the command line")
    nic_entry = catalog.nics.get(nic, field="--nic")
    nics = nics_per_node if nics_per_node is not None else per_node
    if nics < 1:
        raise UserError(f"must be >= 1, got {nics}", field="--nics-per-node")
    domain = min(gpu.domain_size, per_node) if gpu.domain_size < 72 else gpu.domain_size
    try:
        group = place_group(gpu, n, per_node, domain_size=domain, scale_out_link=nic_entry.link,
                            scale_out_gbps_per_gpu=nic_gbps_per_gpu(nic_entry.line_rate_gbit.value, nics, per_node))
    except ValueError as exc:
        raise UserError(str(exc), field="--gpus") from None
    return Placed(group, gpu.name, per_node, nic_entry.name, nics, "command line")


def group_on_cluster(path: str, pool_name: str | None, gpus: int | None) -> Placed:
    """A group of `gpus` GPUs packed onto whole nodes of one pool of a cluster spec."""
    from gpucluster.model.topology import scale_out_view
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(path)
    pool = spec.pool(pool_name) if pool_name else spec.node_pools[0]
    view = scale_out_view(spec, pool.name)
    n = _check_group_size(gpus, pool.total_gpus, pool.gpus_per_node, f"pool {pool.name!r}")
    try:
        group = place_group(pool.gpu_entry, n, pool.gpus_per_node, domain_size=view.domain_size,
                            scale_out_link=view.scale_out_link,
                            scale_out_gbps_per_gpu=view.nic_gbps_per_gpu_per_direction,
                            oversubscription=view.oversubscription, nodes_per_leaf=view.nodes_per_leaf)
    except ValueError as exc:
        raise UserError(str(exc), field="--gpus") from None
    return Placed(group, pool.gpu, pool.gpus_per_node, pool.nic, pool.nics_per_node, f"{path}, pool {pool.name}")
