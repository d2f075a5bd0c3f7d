"""Kubernetes manifests (one or several documents): Pod, Job, Deployment, StatefulSet and
Kubeflow PyTorchJob. Read: GPUs per pod (`resources.limits["nvidia.com/gpu"]`), pod count
(Job parallelism, replicas, PyTorchJob Master + Worker replicas), nprocPerNode, container env
and command/args (as a launch command)."""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from gpucluster.check.jobs.model import Command, JobFile, K8sWorkload, Problem, Setting
from gpucluster.check.jobs.shell import _launchers, _options
from gpucluster.specs.loader import _record_lines

GPU_KEY = "nvidia.com/gpu"
# Objects that run no pods and sit beside workloads in one manifest (a Job's headless Service,
# Kueue's queues): nothing to check, not a parse problem.
NO_PODS = ("Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount", "ResourceFlavor", "ClusterQueue",
           "LocalQueue", "PodDisruptionBudget")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _get(d: Any, *path: str | int) -> Any:
    for p in path:
        if isinstance(d, dict) and p in d:
            d = d[p]
        elif isinstance(d, list) and isinstance(p, int) and p < len(d):
            d = d[p]
        else:
            return None
    return d


def _pod_specs(doc: dict) -> list[tuple[tuple, Any, tuple | None]]:
    """(path to a pod spec, pod count, path of that count) for the kinds we know."""
    kind = doc.get("kind", "")
    if kind == "Pod":
        return [(("spec",), 1, None)]
    if kind == "Job":
        return [(("spec", "template", "spec"), _get(doc, "spec", "parallelism") or 1, ("spec", "parallelism"))]
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return [(("spec", "template", "spec"), _get(doc, "spec", "replicas") or 1, ("spec", "replicas"))]
    if kind == "PyTorchJob":
        out = []
        for role, spec in (_get(doc, "spec", "pytorchReplicaSpecs") or {}).items():
            out.append((("spec", "pytorchReplicaSpecs", role, "template", "spec"), _get(spec, "replicas") or 1,
                        ("spec", "pytorchReplicaSpecs", role, "replicas")))
        return out
    return []


def parse_k8s(path: str, text: str) -> JobFile:
    job = JobFile(path, "kubernetes")
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        job.problems.append(Problem(mark.line + 1 if mark else None, f"YAML syntax error: {exc.problem}"))
        return job
    for node, doc in zip(nodes, docs, strict=True):
        if doc is None:
            continue
        lines: dict[tuple, int] = {}
        _record_lines(node, (), lines)
        if not isinstance(doc, dict) or "kind" not in doc:
            job.problems.append(Problem(node.start_mark.line + 1, "not a Kubernetes object (no `kind:`)"))
            continue
        specs = _pod_specs(doc)
        if not specs and doc["kind"] in NO_PODS:
            continue
        if not specs:
            job.problems.append(Problem(lines.get(("kind",)), f"kind {doc['kind']!r} is not read by gpucluster "
                                        "(Pod, Job, Deployment, StatefulSet, ReplicaSet, PyTorchJob are)"))
            continue
        nproc = _get(doc, "spec", "nprocPerNode")
        total_pods = 0
        gpus: Setting | None = None
        for pod_path, count, _ in specs:
            total_pods += int(count) if str(count).isdigit() else 0
            for i, c in enumerate(_get(doc, *pod_path, "containers") or []):
                cpath = (*pod_path, "containers", i)
                limit = _get(c, "resources", "limits", GPU_KEY)
                if limit is not None:
                    gpus = Setting(str(limit), lines.get((*cpath, "resources", "limits", GPU_KEY)))
                for j, e in enumerate(c.get("env") or []):
                    if isinstance(e, dict) and "name" in e and "value" in e:
                        job.env[str(e["name"])] = Setting(str(e["value"]), lines.get((*cpath, "env", j, "value")))
                argv = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
                if len(argv) == 1 or (len(argv) >= 2 and argv[-2] == "-c"):
                    try:
                        argv = argv[:-1] + shlex.split(argv[-1])
                    except ValueError:
                        pass
                launchers = _launchers(argv)
                if launchers:
                    line = lines.get((*cpath, "command")) or lines.get((*cpath, "args")) or node.start_mark.line + 1
                    job.commands.append(Command(line, argv, launchers, _options(argv[1:], line)))
        pods_line = lines.get(specs[0][2]) if specs[0][2] else None
        job.workloads.append(K8sWorkload(
            doc["kind"], str(_get(doc, "metadata", "name") or "?"), node.start_mark.line + 1, gpus,
            Setting(str(total_pods), pods_line), Setting(str(nproc), lines.get(("spec", "nprocPerNode")))
            if nproc is not None else None))
    return job
