"""Kueue objects for a cluster spec: one ResourceFlavor per GPU type (pool), a ClusterQueue whose
quotas are the pools' GPUs, CPUs and memory, and a LocalQueue in the users' namespace.

A ResourceFlavor's nodeLabels must be labels the nodes really carry, or every admitted pod stays
Pending. The defaults are what the vendors' node labellers write:
- NVIDIA GPU Feature Discovery: `nvidia.com/gpu.product` = NVML's device name with blanks as
  `-` (nvidia-smi's "NVIDIA H100 80GB HBM3" -> NVIDIA-H100-80GB-HBM3). Under MIG or time-slicing
  GFD appends -MIG-... or -SHARED: override then.
- AMD GPU Operator's node labeller: `amd.com/gpu.product-name` = the board's product name with
  blanks as `_` (AMD_Instinct_MI300X_OAM); the board's FRU decides it, so check with
  `kubectl get nodes -L amd.com/gpu.product-name`.
`--node-label [POOL:]KEY=VALUE` replaces them (for all pools, or one).

API version: kueue.x-k8s.io/v1beta2 (served since Kueue v0.15; v1beta1 deprecated since v0.16);
`--api-version v1beta1` for older installations. The fields written here (nodeLabels,
namespaceSelector, queueingStrategy, resourceGroups, clusterQueue) are the same in both."""

from __future__ import annotations

import re

from gpucluster.errors import UserError
from gpucluster.generate.k8s import NAME_ANNOTATION, dump_all
from gpucluster.generate.quoting import check_text, k8s_name

API_GROUP = "kueue.x-k8s.io"
API_VERSIONS = ("v1beta2", "v1beta1")
API = f"{API_GROUP}/{API_VERSIONS[0]}"
NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"
AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
PRODUCT_LABEL = NVIDIA_PRODUCT_LABEL

# Catalog GPU -> (label key, value) as the node labellers write it (see the module docstring).
GPU_NODE_LABELS: dict[str, tuple[str, str]] = {
    "A100-SXM4-40GB": (NVIDIA_PRODUCT_LABEL, "NVIDIA-A100-SXM4-40GB"),
    "A100-SXM4-80GB": (NVIDIA_PRODUCT_LABEL, "NVIDIA-A100-SXM4-80GB"),
    "H100-PCIe": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H100-PCIe"),
    "H100-SXM5-80GB": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3"),
    "H200-SXM-141GB": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H200"),
    # nvidia-smi's "NVIDIA H100 NVL", "NVIDIA H800" and "NVIDIA H100 96GB HBM3" (check with
    # `kubectl get nodes -L nvidia.com/gpu.product` and override with --node-label where they differ).
    "H100-NVL": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H100-NVL"),
    "H800": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H800"),
    "H100-SXM5-96GB": (NVIDIA_PRODUCT_LABEL, "NVIDIA-H100-96GB-HBM3"),
    "B200": (NVIDIA_PRODUCT_LABEL, "NVIDIA-B200"),
    "GB200": (NVIDIA_PRODUCT_LABEL, "NVIDIA-GB200"),
    # The device names aiconfigurator-core's B300/GB300 tables recorded ("NVIDIA B300 SXM6 AC",
    # "NVIDIA GB300"), spaces as the labeller writes them.
    "B300": (NVIDIA_PRODUCT_LABEL, "NVIDIA-B300-SXM6-AC"),
    "GB300": (NVIDIA_PRODUCT_LABEL, "NVIDIA-GB300"),
    "L40S": (NVIDIA_PRODUCT_LABEL, "NVIDIA-L40S"),
    # Older parts: NVML names them "Tesla ..." (nvidia-smi's "Tesla V100-SXM2-16GB", "Tesla T4").
    "V100-SXM2-16GB": (NVIDIA_PRODUCT_LABEL, "Tesla-V100-SXM2-16GB"),
    "V100-SXM2-32GB": (NVIDIA_PRODUCT_LABEL, "Tesla-V100-SXM2-32GB"),
    "V100-PCIe-16GB": (NVIDIA_PRODUCT_LABEL, "Tesla-V100-PCIE-16GB"),
    "V100-PCIe-32GB": (NVIDIA_PRODUCT_LABEL, "Tesla-V100-PCIE-32GB"),
    "P100-SXM2-16GB": (NVIDIA_PRODUCT_LABEL, "Tesla-P100-SXM2-16GB"),
    "P100-PCIe-16GB": (NVIDIA_PRODUCT_LABEL, "Tesla-P100-PCIE-16GB"),
    "K80": (NVIDIA_PRODUCT_LABEL, "Tesla-K80"),
    "T4": (NVIDIA_PRODUCT_LABEL, "Tesla-T4"),
    "A10": (NVIDIA_PRODUCT_LABEL, "NVIDIA-A10"),
    "A10G": (NVIDIA_PRODUCT_LABEL, "NVIDIA-A10G"),
    "L4": (NVIDIA_PRODUCT_LABEL, "NVIDIA-L4"),
    "MI300X": (AMD_PRODUCT_LABEL, "AMD_Instinct_MI300X_OAM"),
    "MI325X": (AMD_PRODUCT_LABEL, "AMD_Instinct_MI325X_OAM"),
}

# Kubernetes label syntax (apimachinery validation): an optional DNS-subdomain prefix and '/',
# a name of at most 63 characters; a value of at most 63 characters, possibly empty.
_LABEL_NAME = r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}")
_LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")


def parse_node_labels(items: list[str] | None) -> dict[str | None, dict[str, str]]:
    """`[POOL:]KEY=VALUE` options -> {pool or None (all pools): {key: value}}. A label key
    cannot hold ':', so text before the first '=' up to its last ':' names a pool."""
    out: dict[str | None, dict[str, str]] = {}
    for item in items or ():
        check_text(item, "--node-label")
        head, eq, value = item.partition("=")
        if not eq:
            raise UserError(f"expected [POOL:]KEY=VALUE, got {item!r}", field="--node-label")
        pool: str | None
        pool, colon, key = head.rpartition(":")
        if not colon:
            pool, key = None, head
        elif not pool:
            raise UserError(f"empty pool name in {item!r}", field="--node-label")
        if not _LABEL_KEY.fullmatch(key) or len(key) > 317:
            raise UserError(f"{key!r} is not a Kubernetes label key ([prefix/]name, name of 1-63 characters "
                            "A-Z a-z 0-9 . _ -)", field="--node-label")
        if not _LABEL_VALUE.fullmatch(value):
            raise UserError(f"{value!r} is not a Kubernetes label value (at most 63 characters A-Z a-z 0-9 . _ -, "
                            "starting and ending alphanumeric)", field="--node-label")
        out.setdefault(pool, {})[key] = value
    return out


def _api(version: str) -> str:
    v = version.removeprefix(f"{API_GROUP}/")
    if v not in API_VERSIONS:
        raise UserError(f"must be one of {', '.join(API_VERSIONS)}, got {version!r}", field="--api-version")
    return f"{API_GROUP}/{v}"


def flavor_labels(pool, overrides: dict[str | None, dict[str, str]]) -> dict[str, str]:
    labels = {**overrides.get(None, {}), **overrides.get(pool.name, {})}
    if labels:
        return labels
    if pool.gpu not in GPU_NODE_LABELS:
        raise UserError(f"no known node label for GPU {pool.gpu} of pool {pool.name!r}: pass "
                        f"--node-label {pool.name}:KEY=VALUE as your nodes are labelled", field="--node-label")
    key, value = GPU_NODE_LABELS[pool.gpu]
    return {key: value}


def kueue_objects(spec, *, queue: str = "gpucluster", namespace: str = "default",
                  cluster_queue: str | None = None, node_labels: list[str] | None = None,
                  api_version: str = API) -> list[dict]:
    check_text(queue, "--queue")
    check_text(namespace, "--namespace")
    if cluster_queue is not None:
        check_text(cluster_queue, "--cluster-queue")
    api = _api(api_version)
    overrides = parse_node_labels(node_labels)
    unknown = sorted(p for p in overrides if p is not None and p not in {pool.name for pool in spec.node_pools})
    if unknown:
        raise UserError(f"no pool named {unknown[0]!r} (pools: {', '.join(p.name for p in spec.node_pools)})",
                        field="--node-label")
    cq = k8s_name(cluster_queue or spec.name)
    gpu_keys = sorted({_gpu_key(p) for p in spec.node_pools}, reverse=True)
    flavors, quotas = [], []
    for pool in spec.node_pools:
        fname = k8s_name(f"{pool.name}-{pool.gpu}")
        flavors.append({"apiVersion": api, "kind": "ResourceFlavor",
                        "metadata": {"name": fname, "annotations": {NAME_ANNOTATION: pool.name}},
                        "spec": {"nodeLabels": flavor_labels(pool, overrides)}})
        # Every flavor of a resource group covers the same resources (0 for the other vendor's GPUs).
        quotas.append({"name": fname, "resources": [
            {"name": "cpu", "nominalQuota": pool.cpu_cores * pool.count},
            {"name": "memory", "nominalQuota": f"{int(pool.ram_gib * pool.count)}Gi"},
            *({"name": key, "nominalQuota": pool.total_gpus if key == _gpu_key(pool) else 0}
              for key in gpu_keys)]})
    cluster_q = {"apiVersion": api, "kind": "ClusterQueue",
                 "metadata": {"name": cq, "annotations": {NAME_ANNOTATION: spec.name}},
                 "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                          "resourceGroups": [{"coveredResources": ["cpu", "memory", *gpu_keys],
                                              "flavors": quotas}]}}
    local = {"apiVersion": api, "kind": "LocalQueue",
             "metadata": {"name": k8s_name(queue), "namespace": k8s_name(namespace)},
             "spec": {"clusterQueue": cq}}
    return [*flavors, cluster_q, local]


def _gpu_key(pool) -> str:
    return "amd.com/gpu" if pool.gpu_entry.vendor == "amd" else "nvidia.com/gpu"


def kueue_yaml(spec, **kw) -> str:
    return dump_all(kueue_objects(spec, **kw))
