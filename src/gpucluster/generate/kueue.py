"""Kueue objects for a cluster spec: one ResourceFlavor per GPU type (pool), a ClusterQueue whose
quotas are the pools' GPUs, CPUs and memory, and a LocalQueue in the users' namespace."""

from __future__ import annotations

from gpucluster.generate.k8s import NAME_ANNOTATION, dump_all
from gpucluster.generate.quoting import check_text, k8s_name

API = "kueue.x-k8s.io/v1beta1"
# What the NVIDIA GPU feature discovery labels nodes with (nvidia.com/gpu.product).
PRODUCT_LABEL = "nvidia.com/gpu.product"


def kueue_objects(spec, *, queue: str = "gpucluster", namespace: str = "default",
                  cluster_queue: str | None = None) -> list[dict]:
    check_text(queue, "--queue")
    check_text(namespace, "--namespace")
    cq = k8s_name(cluster_queue or spec.name)
    gpu_keys = sorted({_gpu_key(p) for p in spec.node_pools}, reverse=True)
    flavors, quotas = [], []
    for pool in spec.node_pools:
        fname = k8s_name(f"{pool.name}-{pool.gpu}")
        flavors.append({"apiVersion": API, "kind": "ResourceFlavor",
                        "metadata": {"name": fname, "annotations": {NAME_ANNOTATION: pool.name}},
                        "spec": {"nodeLabels": {PRODUCT_LABEL: pool.gpu}}})
        # Every flavor of a resource group covers the same resources (0 for the other vendor's GPUs).
        quotas.append({"name": fname, "resources": [
            {"name": "cpu", "nominalQuota": pool.cpu_cores * pool.count},
            {"name": "memory", "nominalQuota": f"{int(pool.ram_gib * pool.count)}Gi"},
            *({"name": key, "nominalQuota": pool.total_gpus if key == _gpu_key(pool) else 0}
              for key in gpu_keys)]})
    cluster_q = {"apiVersion": API, "kind": "ClusterQueue",
                 "metadata": {"name": cq, "annotations": {NAME_ANNOTATION: spec.name}},
                 "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                          "resourceGroups": [{"coveredResources": ["cpu", "memory", *gpu_keys],
                                              "flavors": quotas}]}}
    local = {"apiVersion": API, "kind": "LocalQueue",
             "metadata": {"name": k8s_name(queue), "namespace": k8s_name(namespace)},
             "spec": {"clusterQueue": cq}}
    return [*flavors, cluster_q, local]


def _gpu_key(pool) -> str:
    return "amd.com/gpu" if pool.gpu_entry.vendor == "amd" else "nvidia.com/gpu"


def kueue_yaml(spec, **kw) -> str:
    return dump_all(kueue_objects(spec, **kw))
