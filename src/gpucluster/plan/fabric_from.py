"""Build the fabric a training or serving plan runs on: from a cluster spec or from flags."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog import catalog, parse_accelerator
from gpucluster.errors import UserError
from gpucluster.model.placement import nic_gbps_per_gpu
from gpucluster.model.training.fabric import TrainingFabric


@dataclass(frozen=True)
class PlanTarget:
    fabric: TrainingFabric
    gpus: int
    nodes: int
    description: str
    # The cluster file's rental price (prices.usd_per_gpu_hour, the pool's over the cluster's)
    # and where it comes from; None: the catalog's price for the GPU.
    usd_per_gpu_hour: tuple[float, str] | None = None


def from_cluster(path: str, pool_name: str | None = None, nodes: int | None = None) -> PlanTarget:
    from gpucluster.model.topology import scale_out_view
    from gpucluster.specs.cluster import load_cluster

    spec = load_cluster(path)
    pool = spec.pool(pool_name) if pool_name else spec.node_pools[0]
    view = scale_out_view(spec, pool.name)
    n = nodes if nodes is not None else pool.count
    if not 1 <= n <= pool.count:
        raise UserError(f"pool {pool.name!r} has {pool.count} nodes, asked for {n}", field="--nodes")
    fab = TrainingFabric(pool.gpu, pool.gpus_per_node, view.domain_size, view.scale_out_link,
                         view.nic_gbps_per_gpu_per_direction, view.oversubscription, view.nodes_per_leaf,
                         f"{pool.nics_per_node} x {pool.nic}")
    price = spec.pool_prices(pool.name).usd_per_gpu_hour
    rent = None if price is None else (price, f"{path}: prices.usd_per_gpu_hour")
    return PlanTarget(fab, n * pool.gpus_per_node, n, f"{spec.name} (pool {pool.name}: {n} x {pool.gpus_per_node} {pool.gpu})",
                      rent)


def from_flags(accelerator: str, nodes: int, nic: str, nics_per_node: int | None) -> PlanTarget:
    gpu, per_node = parse_accelerator(accelerator, field="--gpu")
    if nodes < 1:
        raise UserError(f"must be >= 1, got {nodes}", field="--nodes")
    entry = catalog.nics.get(nic, field="--nic")
    nics = nics_per_node if nics_per_node is not None else per_node
    if nics < 1:
        raise UserError(f"must be >= 1, got {nics}", field="--nics-per-node")
    # A rack-scale NVLink domain (GB200 NVL72) spans nodes; an HGX board's stays inside one.
    domain = min(gpu.domain_size, nodes * per_node) if gpu.domain_size > 8 else min(gpu.domain_size, per_node)
    fab = TrainingFabric(gpu.name, per_node, domain, entry.link,
                         nic_gbps_per_gpu(entry.line_rate_gbit.value, nics, per_node), 1.0, None,
                         f"{nics} x {entry.name}")
    return PlanTarget(fab, nodes * per_node, nodes, f"{nodes} x {per_node} {gpu.name}, {nics} x {entry.name} per node")


def with_network(target: PlanTarget, nic: str, nics_per_node: int) -> PlanTarget:
    """The same GPUs on another scale-out network (for what-if advice)."""
    entry = catalog.nics.get(nic)
    f = target.fabric
    fab = TrainingFabric(f.gpu_name, f.gpus_per_node, f.domain, entry.link,
                         nic_gbps_per_gpu(entry.line_rate_gbit.value, nics_per_node, f.gpus_per_node),
                         1.0, f.nodes_per_leaf, f"{nics_per_node} x {entry.name}")
    return PlanTarget(fab, target.gpus, target.nodes, target.description, target.usd_per_gpu_hour)


def from_options(cluster: str | None, pool: str | None, gpu: str | None, nodes: int | None, nic: str,
                 nics_per_node: int | None) -> PlanTarget:
    """The planners' shared `--cluster FILE [--pool]` or `--gpu TYPE:COUNT [--nodes]` choice."""
    if cluster is not None:
        return from_cluster(cluster, pool, nodes)
    if gpu is not None:
        return from_flags(gpu, nodes if nodes is not None else 1, nic, nics_per_node)
    raise UserError("give --cluster FILE, or --gpu TYPE:COUNT (with --nodes N for several nodes, "
                    "e.g. --gpu H100:8 --nodes 16)")
