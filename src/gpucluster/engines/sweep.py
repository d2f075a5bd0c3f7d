"""Sweeps: a grid of gpucluster runs (plans, simulations) executed in parallel by local
processes or on a Ray cluster. Each task runs the `gpucluster` command with `--json`, so a task
does on a Ray worker exactly what it does here, and results equal the serial run's."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "gpucluster-sweep/v1"


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    command: list[str] = Field(min_length=1, description="gpucluster subcommand, e.g. [plan, train] or "
                                                        "[simulate, run]")
    args: list[str] = Field(default_factory=list, description="positional arguments (paths relative to the "
                                                              "sweep file)")
    base: dict[str, Any] = Field(default_factory=dict, description="options every task gets: name -> value")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="options swept: name -> values; "
                                                                         "every combination is one task")
    keep: list[str] = Field(default_factory=list, description="dotted fields of each JSON result to keep "
                                                              "(default: all)")
    paths: list[str] = Field(default_factory=list, description="option names whose values are files "
                                                               "(made relative to the sweep file)")
    timeout_s: float = Field(600, gt=0, description="per task")


def load_sweep(path: str) -> SweepSpec:
    from gpucluster.specs.loader import load_model
    return load_model(SweepSpec, path)


def tasks_of(spec: SweepSpec, base_dir: Path) -> list[dict[str, Any]]:
    keys = list(spec.grid)
    out = []
    for combo in itertools.product(*(spec.grid[k] for k in keys)) if keys else [()]:
        params = {**spec.base, **dict(zip(keys, combo))}
        for k in spec.paths:
            if k in params and not Path(str(params[k])).is_absolute():
                params[k] = str((base_dir / str(params[k])).resolve())
        out.append(params)
    return out


def argv_of(spec: SweepSpec, params: dict[str, Any], base_dir: Path, exe: str) -> list[str]:
    argv = [exe, *spec.command]
    argv += [a if Path(a).is_absolute() or not (base_dir / a).exists() else str((base_dir / a).resolve())
             for a in spec.args]
    for k, v in params.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            argv.append(flag)
        elif v is False or v is None:
            continue
        else:
            argv += [flag, str(v)]
    return argv + ["--json"]


def _pick(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def run_task(argv: list[str], keep: list[str], timeout_s: float) -> dict:
    """One task: run, parse JSON, keep the asked fields. Never raises: failures are data."""
    env = {**os.environ, "NO_COLOR": "1"}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout_s:g} s"}
    except OSError as exc:
        return {"ok": False, "error": str(exc)}
    if p.returncode != 0:
        lines = (p.stderr.strip() or p.stdout.strip() or f"exit code {p.returncode}").splitlines()
        return {"ok": False, "error": lines[-1] if lines else f"exit code {p.returncode}"}
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"ok": False, "error": "the command did not print JSON"}
    return {"ok": True, "result": {k: _pick(doc, k) for k in keep} if keep else doc}


def gpucluster_exe() -> str:
    here = Path(sys.executable).parent / "gpucluster"
    return str(here) if here.exists() else shutil.which("gpucluster") or "gpucluster"


Progress = Callable[[int, int], None]


def run_local(argvs: list[list[str]], spec: SweepSpec, workers: int, progress: Progress | None = None) -> list[dict]:
    results: list[dict | None] = [None] * len(argvs)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = {pool.submit(run_task, a, spec.keep, spec.timeout_s): i for i, a in enumerate(argvs)}
        for done, fut in enumerate(as_completed(futs), start=1):
            results[futs[fut]] = fut.result()
            if progress:
                progress(done, len(argvs))
    return results  # type: ignore[return-value]


def run_ray(argvs: list[list[str]], spec: SweepSpec, address: str, progress: Progress | None = None) -> list[dict]:
    from gpucluster.bench.deps import require_ray

    ray = require_ray()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kw: dict[str, Any] = {"ignore_reinit_error": True, "logging_level": "ERROR", "log_to_driver": False}
    if address == "auto":
        kw["num_cpus"] = os.cpu_count() or 2   # a local Ray started here
    else:
        kw["address"] = address
        host = address.split(":")[0]
        if host.startswith("127."):  # Ray replaces 127.0.0.1 with the machine's address: keep loopback
            kw["_node_ip_address"] = host
    ray.init(**kw)
    try:
        @ray.remote(num_cpus=1)
        def task(argv, keep, timeout_s):
            out = run_task(argv, keep, timeout_s)
            out["node"] = ray.get_runtime_context().get_node_id()
            return out

        refs = [task.options(scheduling_strategy="SPREAD").remote(a, spec.keep, spec.timeout_s) for a in argvs]
        index = {r: i for i, r in enumerate(refs)}
        results: list[dict | None] = [None] * len(refs)
        pending, done = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    results[index[r]] = ray.get(r)
                except Exception as exc:  # a worker died: report the task, keep the rest
                    results[index[r]] = {"ok": False, "error": f"Ray: {type(exc).__name__}: {exc}"}
                done += 1
                if progress:
                    progress(done, len(refs))
        return results  # type: ignore[return-value]
    finally:
        ray.shutdown()


def sweep(path: str, *, ray_address: str | None = None, workers: int | None = None,
          progress: Progress | None = None) -> dict:
    spec = load_sweep(path)
    base_dir = Path(path).resolve().parent
    params = tasks_of(spec, base_dir)
    exe = gpucluster_exe()
    argvs = [argv_of(spec, p, base_dir, exe) for p in params]
    if ray_address:
        outs = run_ray(argvs, spec, ray_address, progress)
    else:
        outs = run_local(argvs, spec, workers or os.cpu_count() or 1, progress)
    tasks = [{"params": p, **{k: v for k, v in o.items() if k != "node"}} for p, o in zip(params, outs)]
    nodes = sorted({o["node"] for o in outs if o.get("node")})
    return {"schema": SCHEMA, "name": spec.name, "engine": f"ray {ray_address}" if ray_address else "local",
            "tasks": tasks, "ok": sum(t["ok"] for t in tasks), "failed": sum(not t["ok"] for t in tasks),
            "ray_nodes": len(nodes) if ray_address else None}
