"""Kubernetes workloads whose GPU requests do not fit the nodes: more `nvidia.com/gpu` per pod
than a node has (unschedulable), more pods x GPUs than the cluster has, or a torchrun
`--nproc_per_node` / PyTorchJob `nprocPerNode` different from the pod's GPUs."""

from __future__ import annotations

from gpucluster.check.context import as_int
from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule


@rule
class K8sGpus(Rule):
    id = "k8s-gpus"
    summary = "Kubernetes GPU limits inconsistent with the nodes"

    def check(self, ctx):
        most = max(p.gpus_per_node for p in ctx.spec.node_pools)
        for job in ctx.jobs:
            for w in job.workloads:
                g = as_int(w.gpus_per_pod)
                if g is None:
                    continue
                pods = as_int(w.pods) or 1
                ev = {"gpus_per_pod": g, "pods": pods, "largest_node_gpus": most, "cluster_gpus": ctx.spec.total_gpus}
                if g > most:
                    yield Finding(self.id, "error", f"{w.kind} {w.name}: nvidia.com/gpu {g} per pod, but no node has "
                                  f"more than {most}: the pods stay Pending", f"nvidia.com/gpu: {most} per pod, more pods",
                                  ev, job.at(w.gpus_per_pod.line))
                elif pods * g > ctx.spec.total_gpus:
                    yield Finding(self.id, "error", f"{w.kind} {w.name}: {pods} pods x {g} GPUs > the cluster's "
                                  f"{ctx.spec.total_gpus}", "fewer pods", ev, job.at(w.pods.line if w.pods else w.line))
                nproc = as_int(w.nproc_per_node)
                if nproc is not None and nproc != g:
                    yield Finding(self.id, "error", f"{w.kind} {w.name}: nprocPerNode {nproc} but {g} GPUs per pod",
                                  f"nprocPerNode: {g}", ev | {"nproc_per_node": nproc}, job.at(w.nproc_per_node.line))
            gpus = [as_int(w.gpus_per_pod) for w in job.workloads if w.gpus_per_pod is not None]
            for c in job.commands if job.kind == "kubernetes" and gpus else ():
                s = c.option("nproc_per_node", "nproc-per-node")
                n = as_int(s)
                if n is not None and s.value.isdigit() and n != gpus[0]:
                    yield Finding(self.id, "error", f"torchrun --nproc_per_node={n} in a pod with {gpus[0]} GPUs",
                                  f"--nproc_per_node={gpus[0]}", {"nproc_per_node": n, "gpus_per_pod": gpus[0]},
                                  job.at(s.line))
