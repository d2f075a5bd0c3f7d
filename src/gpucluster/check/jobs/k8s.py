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
from gpucluster.errors import UserError
from gpucluster.specs.loader import _record_lines
from gpucluster.specs.safe_yaml import CONSTRUCT_ERRORS, check_tree, yaml_error

GPU_KEY = "nvidia.com/gpu"
GPU_KEYS = (GPU_KEY, "amd.com/gpu")   # the NVIDIA and AMD device plugins' resources
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
        out: list[tuple[tuple, Any, tuple | None]] = []
        roles = _get(doc, "spec", "pytorchReplicaSpecs")
        for role, spec in (roles.items() if isinstance(roles, dict) else ()):
            out.append((("spec", "pytorchReplicaSpecs", role, "template", "spec"), _get(spec, "replicas") or 1,
                        ("spec", "pytorchReplicaSpecs", role, "replicas")))
        return out
    return []


def _documents(path: str, text: str, job: JobFile) -> list[tuple[yaml.Node, Any]]:
    """(node, data) per document, composed once and measured (aliases, depth, duplicate keys)
    before they are walked; a document that cannot be read is a problem at its line, and the
    documents after it are not read (the parser cannot resynchronise)."""
    out: list[tuple[yaml.Node, Any]] = []
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            check_tree(node, path)
            out.append((node, loader.construct_document(node)))
    except UserError as exc:
        job.problems.append(Problem(exc.line, f"{exc.field + ': ' if exc.field else ''}{exc.reason}"))
    except CONSTRUCT_ERRORS as exc:
        err = yaml_error(exc, path, text)
        job.problems.append(Problem(err.line, err.reason))
    finally:
        loader.dispose()
    return out


def _list(value: Any, what: str, line: int | None, job: JobFile) -> list:
    """A field that must be a list (containers, env, command, args): anything else is a problem,
    not a crash (`containers: 5` iterated as a list raised TypeError)."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    job.problems.append(Problem(line, f"{what}: expected a list, got {type(value).__name__} {_short(value)}"))
    return []


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


MAX_PODS = 2**31 - 1        # Kubernetes counts are int32


def _count(value: Any, line: int | None, job: JobFile) -> int:
    """A pod count as written (`replicas: 4`, `"4"`); anything but a whole number from 0 to
    2^31-1 is a problem (and counts 0)."""
    text = str(value)
    n = value if isinstance(value, int) and not isinstance(value, bool) else (
        int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None)
    if n is None or not 0 <= n <= MAX_PODS:
        job.problems.append(Problem(line, f"pod count: expected a whole number from 0 to {MAX_PODS}, "
                                          f"got {_short(value)}"))
        return 0
    return n


def parse_k8s(path: str, text: str) -> JobFile:
    job = JobFile(path, "kubernetes")
    for node, doc in _documents(path, text, job):
        if doc is None:
            continue
        lines: dict[tuple, int] = {}
        _record_lines(node, (), lines)
        start = node.start_mark.line + 1
        if not isinstance(doc, dict) or "kind" not in doc:
            job.problems.append(Problem(start, "not a Kubernetes object (no `kind:`)"))
            continue
        kind = doc["kind"]
        if not isinstance(kind, str):
            job.problems.append(Problem(lines.get(("kind",)), f"kind: expected a name, got {_short(kind)}"))
            continue
        if kind in NO_PODS:
            continue
        if not isinstance(doc.get("spec", {}), dict):
            job.problems.append(Problem(lines.get(("spec",)), f"spec: expected a mapping, got {_short(doc['spec'])}"))
            continue
        specs = _pod_specs(doc)
        if not specs:
            job.problems.append(Problem(lines.get(("kind",)), f"kind {kind!r} is not read by gpucluster "
                                        "(Pod, Job, Deployment, StatefulSet, ReplicaSet, PyTorchJob are)"))
            continue
        _workload(job, doc, kind, specs, lines, start)
    return job


def _workload(job: JobFile, doc: dict, kind: str, specs: list[tuple[tuple, Any, tuple | None]],
              lines: dict[tuple, int], start: int) -> None:
    nproc = _get(doc, "spec", "nprocPerNode")
    total_pods = 0
    gpus: Setting | None = None
    for pod_path, count, count_path in specs:
        total_pods += _count(count, lines.get(count_path) if count_path else None, job)
        cs_path = (*pod_path, "containers")
        for i, c in enumerate(_list(_get(doc, *cs_path), ".".join(map(str, cs_path)), lines.get(cs_path), job)):
            cpath = (*cs_path, i)
            if not isinstance(c, dict):
                job.problems.append(Problem(lines.get(cpath), f"container {i}: expected a mapping, got {_short(c)}"))
                continue
            for key in GPU_KEYS:
                limit = _get(c, "resources", "limits", key)
                if limit is not None:
                    gpus = Setting(str(limit), lines.get((*cpath, "resources", "limits", key)))
                    break
            for j, e in enumerate(_list(c.get("env"), "env", lines.get((*cpath, "env")), job)):
                if isinstance(e, dict) and "name" in e and "value" in e:
                    job.env[str(e["name"])] = Setting(str(e["value"]), lines.get((*cpath, "env", j, "value")))
            argv = [str(x) for x in _list(c.get("command"), "command", lines.get((*cpath, "command")), job)
                    + _list(c.get("args"), "args", lines.get((*cpath, "args")), job)]
            if len(argv) == 1 or (len(argv) >= 2 and argv[-2] == "-c"):
                try:
                    argv = argv[:-1] + shlex.split(argv[-1])
                except ValueError:
                    pass
            launchers = _launchers(argv)
            if launchers:
                line = lines.get((*cpath, "command")) or lines.get((*cpath, "args")) or start
                job.commands.append(Command(line, argv, launchers, _options(argv[1:], line)))
    pods_line = lines.get(specs[0][2]) if specs[0][2] else None
    job.workloads.append(K8sWorkload(
        kind, str(_get(doc, "metadata", "name") or "?"), start, gpus, Setting(str(total_pods), pods_line),
        Setting(str(nproc), lines.get(("spec", "nprocPerNode"))) if nproc is not None else None))
