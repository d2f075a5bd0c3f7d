"""Sweeps: a grid of gpucluster runs (plans, simulations, checks) executed in parallel by local
worker processes or on a Ray cluster. Each task calls the Python API in-process (no `gpucluster`
subprocess) and keeps the document `--json` would print, so a task does on a Ray worker exactly
what it does here, and results equal the serial run's."""

from __future__ import annotations

import inspect
import itertools
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpucluster.jsonable import finite

SCHEMA = "gpucluster-sweep/v1"
MAX_TASKS = 100_000      # a sweep's grid: checked as the product of the value counts, before it is expanded


@dataclass(frozen=True)
class Runner:
    """How one allowed command runs in-process: the API function, the names its positional
    arguments bind to, sweep option names that differ from the function's, options the
    command has for its terminal output only (accepted, unused), and the document it returns."""
    function: str                                   # "module:name" of the API function
    document: Callable[[Any], dict[str, Any]]       # result -> the --json document
    positional: tuple[str, ...] = ()
    rename: dict[str, str] = field(default_factory=dict)
    display_only: tuple[str, ...] = ()
    # The document -> the warnings its row carries whatever `keep` says (a plan's MFU above the best
    # published run, plan/mfu_reference.py): a kept MFU must never read as a plausible one.
    flags: Callable[[dict[str, Any]], list[str]] | None = None


def _plan_train_flags(doc: dict[str, Any]) -> list[str]:
    return [doc["above_best_published"]] if doc.get("above_best_published") else []


def _plan_train_doc(plan: Any) -> dict[str, Any]:
    from gpucluster.documents.plan_train import build
    return build(plan).dump()


def _document(result: Any) -> dict[str, Any]:
    return result.document().dump()


def _simulation_doc(run: Any) -> dict[str, Any]:
    from gpucluster.documents import dump
    return dump("simulation", run.summary)


_SIMULATE = Runner("gpucluster.sim.request:simulate", _simulation_doc, positional=("scenario",))
# The commands a sweep may run (the allow-list), by their words on the command line.
COMMANDS: dict[tuple[str, ...], Runner] = {
    ("plan", "train"): Runner("gpucluster.plan.train_request:plan_train", _plan_train_doc, flags=_plan_train_flags),
    ("plan", "serve"): Runner("gpucluster.plan.serve_request:plan_serve", _document,
                              rename={"input": "input_tokens", "output": "output_tokens"}, display_only=("top",)),
    ("simulate",): _SIMULATE,
    ("simulate", "run"): _SIMULATE,
    ("check",): Runner("gpucluster.check.request:check", _document, positional=("cluster",),
                       rename={"job": "jobs", "rule": "rules"}),
}


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    command: list[str] = Field(min_length=1, description="gpucluster subcommand: " + "; ".join(
        " ".join(c) for c in COMMANDS))
    args: list[str] = Field(default_factory=list, description="positional arguments (paths relative to the "
                                                              "sweep file)")
    base: dict[str, Any] = Field(default_factory=dict, description="options every task gets: name -> value")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="options swept: name -> values; "
                                                                         "every combination is one task")
    keep: list[str] = Field(default_factory=list, description="dotted fields of each JSON result to keep "
                                                              "(default: all)")
    paths: list[str] = Field(default_factory=list, description="option names whose values are files "
                                                               "(made relative to the sweep file)")
    timeout_s: float = Field(600, gt=0, le=86400, allow_inf_nan=False, description="per task (at most a day)")

    @field_validator("command")
    @classmethod
    def _allowed(cls, value: list[str]) -> list[str]:
        if tuple(value) not in COMMANDS:
            raise ValueError(f"a sweep runs {', '.join(repr(' '.join(c)) for c in COMMANDS)}; "
                             f"got {' '.join(value)!r}")
        return value

    @field_validator("grid")
    @classmethod
    def _bounded(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        n = 1
        for key, values in value.items():
            if not values:
                raise ValueError(f"{key}: an empty list of values makes no task")
            n *= len(values)
            if n > MAX_TASKS:   # 22 keys x 2 values reached 3.5 GB when the product was expanded first
                raise ValueError(f"the grid makes more than {MAX_TASKS:,} tasks (product of the value counts); "
                                 "split the sweep")
        return value


def load_sweep(path: str) -> SweepSpec:
    from gpucluster.specs.loader import load_model
    return load_model(SweepSpec, path)


def tasks_of(spec: SweepSpec, base_dir: Path) -> list[dict[str, Any]]:
    keys = list(spec.grid)
    out = []
    for combo in itertools.product(*(spec.grid[k] for k in keys)) if keys else [()]:
        params = {**spec.base, **dict(zip(keys, combo, strict=True))}
        for k in spec.paths:
            if k in params and not Path(str(params[k])).is_absolute():
                params[k] = str((base_dir / str(params[k])).resolve())
        out.append(params)
    return out


def args_of(spec: SweepSpec, base_dir: Path) -> list[str]:
    """Positional arguments, an existing relative path made absolute from the sweep file's folder."""
    return [a if Path(a).is_absolute() or not (base_dir / a).exists() else str((base_dir / a).resolve())
            for a in spec.args]


def _pick(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _convert(value: Any, annotation: str, option: str) -> Any:
    """A value as the command line would pass it (YAML may give text for a number, or a number
    for text), converted to what the API function's annotation takes."""
    from gpucluster.errors import UserError

    takes = {t.strip() for t in annotation.replace("]", "|").replace("[", "|").split("|")}
    if "list" in takes and isinstance(value, str):
        return [value]
    if isinstance(value, str) and "str" not in takes and takes & {"int", "float"}:
        try:
            return int(value) if "int" in takes else float(value)
        except ValueError:
            raise UserError(f"expected a number, got {value!r}", field=f"--{option}") from None
    if isinstance(value, int | float) and not isinstance(value, bool) and "str" in takes \
            and not takes & {"int", "float"}:
        return str(value)
    return value


def flags_of(command: list[str] | tuple[str, ...], doc: dict[str, Any]) -> list[str]:
    """The warnings a task's whole document raises (Runner.flags), before `keep` picks fields."""
    runner = COMMANDS.get(tuple(command))
    return runner.flags(doc) if runner and runner.flags else []


def _call(command: tuple[str, ...], args: list[str], params: dict[str, Any]) -> dict[str, Any]:
    """Run one point through the API and return its --json document."""
    from importlib import import_module

    from gpucluster.errors import UserError

    runner = COMMANDS[command]
    module, name = runner.function.split(":")
    fn = getattr(import_module(module), name)
    # The annotations as written (text: the modules use `from __future__ import annotations`).
    hints = {n: str(p.annotation) for n, p in inspect.signature(fn).parameters.items()}
    if len(args) > len(runner.positional):
        raise UserError(f"{' '.join(command)} takes {len(runner.positional)} argument(s), got {len(args)}",
                        field="args")
    kwargs: dict[str, Any] = dict(zip(runner.positional, args, strict=False))
    for key, value in params.items():
        option = key.replace("_", "-")
        # As on the command line: a false or null option is left out (the command's default).
        if value is False or value is None or key.replace("-", "_") in runner.display_only:
            continue
        arg = runner.rename.get(key.replace("-", "_"), key.replace("-", "_"))
        if arg not in hints or arg in runner.positional:
            raise UserError(f"no such option for {' '.join(command)}", field=f"--{option}")
        kwargs[arg] = _convert(value, hints[arg], option)
    return runner.document(fn(**kwargs))


class _Timeout(BaseException):
    """Raised in a task that ran past timeout_s (a BaseException: no `except Exception` in the
    planner can swallow it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def run_point(command: list[str] | tuple[str, ...], args: list[str], params: dict[str, Any], keep: list[str],
              timeout_s: float) -> dict[str, Any]:
    """One task: run, keep the asked fields. Never raises: failures are data (the one line the
    command would print, or the exception of a bug)."""
    from gpucluster.safe_text import one_line
    from gpucluster.errors import UserError

    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if timed:
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        doc = finite(_call(tuple(command), args, params))
    except _Timeout:
        return {"ok": False, "error": f"timed out after {timeout_s:g} s"}
    except UserError as exc:
        return {"ok": False, "error": f"error: {one_line(exc.message)}"}
    except Exception as exc:  # noqa: BLE001  a bug in one point must not lose the others: reported with its type
        return {"ok": False, "error": one_line(f"{type(exc).__name__}: {exc}")}
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return {"ok": True, "result": {k: _pick(doc, k) for k in keep} if keep else doc,
            "flags": flags_of(command, doc)}


Progress = Callable[[int, int], None]


def _context() -> Any:
    """Worker processes start from a fresh interpreter (forkserver; spawn where there is none):
    forking a process whose progress bar runs a thread could copy a held lock."""
    import multiprocessing as mp
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


def run_local(spec: SweepSpec, args: list[str], params: list[dict[str, Any]], workers: int,
              progress: Progress | None = None) -> list[dict]:
    """Every point, in worker processes (one at a time here when workers is 1)."""
    if workers <= 1 or len(params) <= 1:
        out = []
        for i, p in enumerate(params, start=1):
            out.append(run_point(spec.command, args, p, spec.keep, spec.timeout_s))
            if progress:
                progress(i, len(params))
        return out
    results: list[dict | None] = [None] * len(params)
    with ProcessPoolExecutor(max_workers=min(workers, len(params)), mp_context=_context()) as pool:
        futs = {pool.submit(run_point, spec.command, args, p, spec.keep, spec.timeout_s): i
                for i, p in enumerate(params)}
        for done, fut in enumerate(as_completed(futs), start=1):
            try:
                results[futs[fut]] = fut.result()
            except Exception as exc:  # noqa: BLE001  the worker process died (killed, out of memory): the task failed
                results[futs[fut]] = {"ok": False, "error": f"worker: {type(exc).__name__}: {exc}"}
            if progress:
                progress(done, len(params))
    return results  # type: ignore[return-value]


def run_ray(spec: SweepSpec, args: list[str], params: list[dict[str, Any]], address: str,
            progress: Progress | None = None) -> list[dict]:
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
        def task(command, args, point, keep, timeout_s):
            out = run_point(command, args, point, keep, timeout_s)
            out["node"] = ray.get_runtime_context().get_node_id()
            return out

        refs = [task.options(scheduling_strategy="SPREAD").remote(spec.command, args, p, spec.keep, spec.timeout_s)
                for p in params]
        index = {r: i for i, r in enumerate(refs)}
        results: list[dict | None] = [None] * len(refs)
        pending, done = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    results[index[r]] = ray.get(r)
                except Exception as exc:  # noqa: BLE001  a worker died: report the task, keep the rest
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
    args = args_of(spec, base_dir)
    if ray_address:
        outs = run_ray(spec, args, params, ray_address, progress)
    else:
        outs = run_local(spec, args, params, workers or os.cpu_count() or 1, progress)
    tasks = [{"params": p, **{k: v for k, v in o.items() if k not in ("node", "flags")}, "flags": o.get("flags", [])}
             for p, o in zip(params, outs, strict=True)]
    nodes = sorted({o["node"] for o in outs if o.get("node")})
    return {"schema": SCHEMA, "name": spec.name, "engine": f"ray {ray_address}" if ray_address else "local",
            "tasks": tasks, "ok": sum(t["ok"] for t in tasks), "failed": sum(not t["ok"] for t in tasks),
            "ray_nodes": len(nodes) if ray_address else None}
