"""A Kubernetes Indexed Job (one pod per node, torchrun in each) with `nvidia.com/gpu` limits,
the Kueue queue label and a headless Service for the rendezvous."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from gpucluster.generate.nccl import nccl_env
from gpucluster.generate.plan_file import JobPlan
from gpucluster.generate.quoting import check_text, k8s_name
from gpucluster.generate.torchrun import Launch, torchrun_words

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NAME_ANNOTATION = "gpucluster.io/name"  # the literal name the user gave


@dataclass(frozen=True)
class K8sOptions:
    job_name: str = "train"
    namespace: str = "default"
    queue: str | None = "gpucluster"     # Kueue LocalQueue; None: no label
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3"
    socket_ifname: str | None = None
    cpu_per_gpu: int = 8
    memory_gib_per_gpu: int = 64

    def __post_init__(self) -> None:
        for f, v in (("--job-name", self.job_name), ("--namespace", self.namespace), ("--image", self.image)):
            check_text(v, f)
        if self.queue is not None:
            check_text(self.queue, "--queue")


def k8s_objects(plan: JobPlan, launch: Launch, opts: K8sOptions) -> list[dict]:
    name = k8s_name(opts.job_name, 50)  # pods are NAME-INDEX-xxxxx: keep room under 63
    ns = k8s_name(opts.namespace)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "gpucluster"}
    job_labels = dict(labels)
    if opts.queue:
        job_labels[QUEUE_LABEL] = k8s_name(opts.queue)
    annotations = {NAME_ANNOTATION: opts.job_name,
                   "gpucluster.io/plan": f"{plan.model} on {plan.nodes} x {plan.gpus_per_node} {plan.gpu}"}
    head = f"{name}-0.{name}.{ns}.svc"
    argv = torchrun_words(plan, launch, nnodes=str(plan.nodes), endpoint=f"{head}:{launch.port}", rdzv_id=name)
    g = plan.gpus_per_node
    resources = {"limits": {"nvidia.com/gpu": g},
                 "requests": {"nvidia.com/gpu": g, "cpu": str(opts.cpu_per_gpu * g),
                              "memory": f"{opts.memory_gib_per_gpu * g}Gi"}}
    container = {"name": "trainer", "image": opts.image, "command": [str(w) for w in argv],
                 "env": [{"name": n, "value": v} for n, v, _ in nccl_env(plan, opts.socket_ifname)],
                 "ports": [{"containerPort": launch.port, "name": "rdzv"}],
                 "resources": resources,
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": ns, "labels": job_labels, "annotations": annotations},
           "spec": {"completionMode": "Indexed", "completions": plan.nodes, "parallelism": plan.nodes,
                    "backoffLimit": 0, "suspend": bool(opts.queue),
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"subdomain": name, "restartPolicy": "Never",
                                          "containers": [container],
                                          "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
               "spec": {"clusterIP": "None", "selector": labels,
                        "ports": [{"name": "rdzv", "port": launch.port}]}}
    return [service, job]


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # shared dicts are written out in full, no &id001
        return True


def dump_all(objects: list[dict]) -> str:
    return yaml.dump_all(objects, Dumper=_NoAliases, sort_keys=False, default_flow_style=False, width=1000)


def k8s_yaml(plan: JobPlan, launch: Launch, opts: K8sOptions) -> str:
    return dump_all(k8s_objects(plan, launch, opts))
