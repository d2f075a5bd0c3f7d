"""A Kubernetes Indexed Job (one pod per node, torchrun in each) with the GPU vendor's device
plugin resource (`nvidia.com/gpu`, or `amd.com/gpu` for AMD Instinct: the name the AMD GPU
device plugin registers, and the resource generate/kueue.py gives the AMD flavor its quota
in), a container image for the vendor (CUDA or ROCm PyTorch), the Kueue queue label and a
headless Service for the rendezvous.

With Megatron-LM arguments, the data, tokenizer and checkpoint directory are container
environment variables left empty: the container's command refuses to start until each is set
(kubelet expands `$(NAME)` in the arguments from them)."""

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
    image: str | None = None              # None: the vendor's PyTorch image (IMAGES)
    socket_ifname: str | None = None
    cpu_per_gpu: int = 8
    memory_gib_per_gpu: int = 64

    def __post_init__(self) -> None:
        for f, v in (("--job-name", self.job_name), ("--namespace", self.namespace)):
            check_text(v, f)
        if self.image is not None:
            check_text(self.image, "--image")
        if self.queue is not None:
            check_text(self.queue, "--queue")
        if self.socket_ifname is not None:   # an env value of the manifest: U+2028 got through (issue 23)
            check_text(self.socket_ifname, "--socket-ifname")


# The vendor's PyTorch container (the generated command starts torchrun in it): NVIDIA's NGC
# PyTorch, AMD's ROCm PyTorch (hub.docker.com/r/rocm/pytorch).
IMAGES = {"nvidia": "nvcr.io/nvidia/pytorch:24.05-py3",
          "amd": "rocm/pytorch:rocm6.2_ubuntu22.04_py3.10_pytorch_release_2.3.0"}
RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def gpu_vendor(gpu: str) -> str:
    from gpucluster.catalog import catalog

    return catalog.gpus.get(gpu).vendor if gpu in catalog.gpus else "nvidia"


def k8s_var(name: str) -> str:
    return f"$({name})"


def _guarded(argv: list[str], names: list[str]) -> list[str]:
    """bash -c: stop (exit 2) naming the first placeholder left empty, else exec the command."""
    check = (f"for v in {' '.join(names)}; do if [ -z \"${{!v}}\" ]; then echo \"error: set $v in the "
             "container's env\" >&2; exit 2; fi; done; exec \"$@\"")
    return ["/bin/bash", "-c", check, "train", *argv]


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
    argv = [str(w) for w in torchrun_words(plan, launch, nnodes=str(plan.nodes), endpoint=f"{head}:{launch.port}",
                                           rdzv_id=name, var=k8s_var)]
    env = [{"name": n, "value": v} for n, v, _ in nccl_env(plan, opts.socket_ifname)]
    if launch.arg_style == "megatron":
        from gpucluster.generate.megatron import megatron_args
        from gpucluster.generate.megatron_job import PLACEHOLDERS

        env += [{"name": n, "value": v} for n, v in megatron_args(plan).env.items() if v is not None]
        env += [{"name": n, "value": ""} for n, _ in PLACEHOLDERS]
        argv = _guarded(argv, [n for n, _ in PLACEHOLDERS])
    vendor = gpu_vendor(plan.gpu)
    gpu_key = RESOURCES.get(vendor, "nvidia.com/gpu")
    g = plan.gpus_per_node
    # Quantities as strings: the API server reads a number too, but the kubernetes client's
    # models (StrictStr) refuse one (tests/generate/test_k8s_client_models.py).
    resources = {"limits": {gpu_key: str(g)},
                 "requests": {gpu_key: str(g), "cpu": str(opts.cpu_per_gpu * g),
                              "memory": f"{opts.memory_gib_per_gpu * g}Gi"}}
    container = {"name": "trainer", "image": opts.image or IMAGES.get(vendor, IMAGES["nvidia"]), "command": argv,
                 "env": env,
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
