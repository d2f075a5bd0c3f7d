"""The long fuzz run: N mutated-input cases (default 10,000), each `gpucluster` run in its own
process under a CPU-seconds and address-space limit and a wall-clock limit; prints how many
ended in a traceback, a hang, a memory blow-up, a crash, an exit-2 error that was not one line,
eaten markup, a control character on the terminal, or a wrong accept (a value the case knows is
invalid, taken without an error).

    .venv/bin/python benchmarks/fuzz_long.py                 # 10,000 cases, fork server, 1 worker
    .venv/bin/python benchmarks/fuzz_long.py -n 1000 --keep /tmp/fuzz-failures
    .venv/bin/python benchmarks/fuzz_long.py -n 300 --compare   # fork vs exec: the same verdicts?
    .venv/bin/python benchmarks/fuzz_long.py --index 507,2342     # rerun cases by index

Two ways to run a case, both one process per case with the same limits:

- fork (default): this process imports gpucluster, its commands and what they import lazily
  (numpy, pydantic models, the catalog) once, then forks a child per case. The child sets its
  limits, points fd 0/1/2 at the case's files, enters the case's folder, takes the case's
  environment, makes the rich consoles again (they keep the width and colour of the terminal
  they were made on) and runs the same entry point as the `gpucluster` script
  (`gpucluster.cli.app:main`) in-process. No start-up per case: ~10x cheaper.
- `--exec`: the child execs the `gpucluster` script, a fresh interpreter per case (what a user
  runs; ~0.8 CPU-s a case of start-up). `--compare` runs every case both ways and reports the
  cases whose verdicts differ.

Cases come from tests/fuzz/fuzz_cases.py and the oracle from fuzz_oracle.py (as in the pytest slice,
here with every command kind: plan, check, simulate and traces included), seeded by their
index, so `--first K -n 1` reruns case K. Exit 1 when any case broke a promise.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from fuzz_cases import make_case  # noqa: E402
from fuzz_mutations import Case, RandomSource  # noqa: E402
from fuzz_oracle import classify  # noqa: E402

EXE = Path(sys.executable).parent / "gpucluster"
CLASSES = ("traceback", "hang", "memory", "crash", "not-one-line", "markup", "escape", "wrong-accept")
CASE_ENV = {"NO_COLOR": "1", "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}


# --- the fork server --------------------------------------------------------------------------

def prepare_server() -> None:
    """Import everything a command may import, and load the shipped data files, once: each
    forked child then starts with them in memory (copy-on-write)."""
    import importlib
    import pkgutil

    import gpucluster
    for mod in pkgutil.walk_packages(gpucluster.__path__, "gpucluster."):
        importlib.import_module(mod.name)
    # Imported inside functions by the commands (found by diffing sys.modules after each command).
    for name in ("rich.table", "rich.markup", "rich.progress", "rich.panel", "rich.text", "rich.rule",
                 "rich.columns", "rich.syntax", "rich.tree", "rich.box", "rich.live", "click.shell_completion",
                 "numpy.random", "csv", "shlex", "statistics", "json", "decimal", "zoneinfo", "html"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # The shipped data (pure loaders of files no case writes): loaded once here, not per case.
    from gpucluster.catalog import catalog
    from gpucluster.catalog import operations as ops
    from gpucluster.specs.workload import model_presets
    for family in catalog.families().values():
        len(family)
    for loader in (ops.failure_profiles, ops.operations, ops.price_book, ops.facility_limits, model_presets):
        loader()
    try:
        from gpucluster.model.facility import system_book
        system_book()
    except Exception:                                  # a data file mid-edit: the children load it
        pass


def _encoding() -> str:
    return (sys.__stdout__.encoding if sys.__stdout__ is not None else None) or "utf-8"


def _std_stream(fd: int, errors: str, line_buffering: bool) -> io.TextIOWrapper:
    """A text stream on `fd` as a fresh interpreter makes it for a file (buffered, strict stdout,
    backslashreplace stderr, line-buffered stderr)."""
    return io.TextIOWrapper(open(fd, "wb", closefd=False), encoding=_encoding(),
                            errors=errors, line_buffering=line_buffering)


def _child_setup(folder: Path, env: dict[str, str], args: argparse.Namespace) -> None:
    """In the forked child, before the case runs: own session, limits, std fds, folder, env."""
    os.setsid()
    cpu, mem = args.cpu, args.memory * 2**20
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))       # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, folder / ".stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, folder / ".stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        f = os.open(path, flags, 0o644)
        os.dup2(f, fd)
        os.close(f)
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(env)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_in_child(argv: list[str]) -> int:
    """The case through `gpucluster.cli.app:main`, as the console script runs it: the exit code
    a fresh `gpucluster` process would end with."""
    import traceback

    from gpucluster.cli import app as app_module
    from gpucluster.cli.render import reset_consoles

    # The child's own streams, replaced as a fresh process has them (typeshed marks __std*__ Final).
    stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=_encoding())  # noqa: SIM115  (never closed: stdin)
    sys.stdin = sys.__stdin__ = stdin  # type: ignore[misc]  # see above
    sys.stdout = sys.__stdout__ = _std_stream(1, "strict", False)  # type: ignore[misc]  # see above
    sys.stderr = sys.__stderr__ = _std_stream(2, "backslashreplace", True)  # type: ignore[misc]  # see above
    reset_consoles()
    sys.argv = ["gpucluster", *argv]
    code = 0
    try:
        app_module.main()
    except SystemExit as exc:                        # the interpreter's own rules for exit(x)
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:                            # what the user would see: a traceback, exit 1
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:                            # a fresh process reports this on exit, code 120
            code = 120
    return code


def _run_call_in_child(call: dict, folder: Path) -> int:
    """An API case (fuzz_api_cases.run_call): 0 returned, 2 a UserError (one line on stderr), 1 and
    a traceback for any other exception."""
    from fuzz_api_cases import run_call

    sys.stdout = _std_stream(1, "strict", False)
    sys.stderr = _std_stream(2, "backslashreplace", True)
    code = run_call(call, folder)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return code


# --- running cases ----------------------------------------------------------------------------

@dataclass
class Running:
    index: int
    case: Case
    folder: Path
    argv: list[str]
    mode: str
    deadline: float
    killed: bool = False


def start(index: int, case: Case, folder: Path, mode: str, args: argparse.Namespace) -> tuple[int, Running]:
    folder.mkdir(parents=True, exist_ok=True)
    case.write(folder)
    argv = case.args(folder)
    env = {**BASE_ENV, **CASE_ENV}
    for key, value in case.environment(folder).items():   # PATH: stub programs first
        env[key] = value.replace("$PATH", BASE_ENV.get("PATH", ""))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()                               # nothing buffered here is written twice
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _child_setup(folder, env, args)
            if mode == "exec" and case.call is None:   # an API case runs in the child either way
                os.execve(str(EXE), [str(EXE), *argv], env)
            code = _run_call_in_child(case.call, folder) if case.call is not None else _run_in_child(argv)
        except BaseException:
            try:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(1)
        os._exit(code)
    return pid, Running(index, case, folder, argv, mode, time.monotonic() + args.wall)


def finish(run: Running, status: int, usage: resource.struct_rusage | None) -> dict:
    folder = run.folder
    stdout = (folder / ".stdout").read_text("utf-8", "replace")
    stderr = (folder / ".stderr").read_text("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
    if run.killed:
        code: int | str = "timeout"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        code = "timeout" if sig in (signal.SIGXCPU, signal.SIGKILL) else f"signal {sig}"
    else:
        code = os.WEXITSTATUS(status)
    if isinstance(code, str) and code.startswith("signal"):
        problems = ["crash"]
    else:
        problems = classify("memory" if "MemoryError" in stderr and code not in (0, 2) else code, stdout, stderr,
                            refuse=run.case.refuse, expect=run.case.expect)
    return {"index": run.index, "kind": run.case.kind, "note": run.case.note, "mode": run.mode,
            "argv": [a.replace(str(folder), "{dir}") for a in run.argv], "code": code, "cpu_s": round(cpu, 3),
            "maxrss_mib": round(usage.ru_maxrss / 1024, 1) if usage else 0.0, "problems": problems,
            "site": _site(stderr), "last": (stderr.strip().splitlines() or [""])[-1][:300]}


def run_all(jobs: Iterator[tuple[int, str]], work: Path, args: argparse.Namespace) -> Iterator[dict]:
    """Run (index, mode) jobs, `args.workers` at a time, yielding each result as it ends. One
    thread: the parent only forks, waits and kills (no fork from a threaded process)."""
    running: dict[int, Running] = {}
    pending = iter(jobs)
    exhausted = False
    while running or not exhausted:
        while not exhausted and len(running) < args.workers:
            try:
                index, mode = next(pending)
            except StopIteration:
                exhausted = True
                break
            case = make_case(RandomSource(index), slow=not args.fast_only, kinds=args.kinds)
            pid, run = start(index, case, work / f"{index}-{mode}", mode, args)
            running[pid] = run
        if not running:
            break
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid and pid in running:
            run = running.pop(pid)
            result = finish(run, status, usage)
            if result["problems"] and args.keep:
                shutil.copytree(run.folder, args.keep / f"{run.index}-{run.mode}", dirs_exist_ok=True,
                                ignore=_special_files)
            shutil.rmtree(run.folder, ignore_errors=True)
            yield result
            continue
        now = time.monotonic()
        for pid, run in running.items():
            if now > run.deadline and not run.killed:
                run.killed = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.005)


def _special_files(folder: str, names: list[str]) -> list[str]:
    """Named pipes (and other non-files) a case made: not copied with --keep (the generator makes
    them again)."""
    import stat

    return [n for n in names if not stat.S_ISREG(os.lstat(os.path.join(folder, n)).st_mode)
            and not stat.S_ISDIR(os.lstat(os.path.join(folder, n)).st_mode)]


def _site(stderr: str) -> str | None:
    """The innermost gpucluster frame of a traceback: where the fix goes."""
    frames = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith('File "') and "gpucluster" in ln
              and "fuzz_long" not in ln]
    return frames[-1].split("gpucluster/", 1)[-1] if frames else None


BASE_ENV: dict[str, str] = {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--cases", type=int, default=10_000)
    ap.add_argument("--first", type=int, default=0, help="index of the first case (cases are seeded by index)")
    ap.add_argument("--index", type=lambda t: [int(x) for x in t.split(",") if x.strip()],
                    help="run just these cases, e.g. --index 507,2342 (the failures of an earlier run)")
    ap.add_argument("--workers", type=int, default=1, help="cases at a time (default 1)")
    ap.add_argument("--exec", action="store_true", help="a fresh `gpucluster` process per case (no fork server)")
    ap.add_argument("--compare", action="store_true", help="run every case both ways; report verdicts that differ")
    ap.add_argument("--cpu", type=int, default=20, help="CPU seconds per case before it counts as a hang")
    ap.add_argument("--wall", type=float, default=60.0, help="wall seconds per case before it counts as a hang")
    ap.add_argument("--memory", type=int, default=3072, help="address space per case, MiB")
    ap.add_argument("--slow-s", type=float, default=5.0, help="CPU seconds above which a finished case is 'slow'")
    ap.add_argument("--fast-only", action="store_true", help="only the commands of the pytest slice")
    ap.add_argument("--kinds", type=lambda t: [k for k in t.split(",") if k.strip()],
                    help="only these case kinds, e.g. --kinds init,local,anyopt (with --fast-only: their fast commands)")
    ap.add_argument("--keep", type=Path, help="copy the files of every failing case here")
    ap.add_argument("--json", type=Path, help="write every result here")
    ap.add_argument("--progress", type=int, default=250, help="a progress line every N cases")
    ap.add_argument("--live-tree", action="store_true",
                    help="run src/ as it is while the run lasts (default: a copy made at the start, so that "
                         "edits during a long run do not mix old and new modules)")
    args = ap.parse_args()
    from fuzz_cases import KINDS
    unknown = sorted(set(args.kinds or ()) - set(KINDS))
    if unknown:
        ap.error(f"unknown kinds {', '.join(unknown)} (valid: {', '.join(KINDS)})")
    if not EXE.exists():
        sys.exit(f"{EXE} missing: install the package (make install)")
    BASE_ENV.update(os.environ)
    snapshot = None
    if not args.live_tree:
        # The fork server holds the modules it imported at the start; a module added or changed
        # later would be imported from the new tree in a child, next to old ones (seen: a
        # refactor mid-run gave 17 false tracebacks). A copy keeps the whole run on one tree,
        # in both modes (exec children get it first on PYTHONPATH).
        snapshot = Path(tempfile.mkdtemp(prefix="gpucluster-fuzz-src-"))
        shutil.copytree(ROOT / "src" / "gpucluster", snapshot / "gpucluster",
                        ignore=shutil.ignore_patterns("__pycache__"))
        sys.path.insert(0, str(snapshot))
        BASE_ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), BASE_ENV.get("PYTHONPATH")]))
    modes = ["fork", "exec"] if args.compare else ["exec" if args.exec else "fork"]
    t0 = time.monotonic()
    if "fork" in modes:
        prepare_server()
    prepare_s = time.monotonic() - t0
    work = Path(tempfile.mkdtemp(prefix="gpucluster-fuzz-"))
    results: list[dict] = []
    indices = args.index if args.index is not None else range(args.first, args.first + args.cases)
    jobs = ((i, m) for i in indices for m in modes)
    try:
        for n, r in enumerate(run_all(jobs, work, args), 1):
            results.append(r)
            if r["problems"]:
                shown = " ".join(a if len(a) <= 80 else f"{a[:60]}...({len(a):,} chars)" for a in r["argv"])
                print(f"case {r['index']} [{r['mode']}] {r['kind']} {r['problems']}: gpucluster {shown!r} "
                      f"({r['note'][:80]}) -> {r['code']}: {r['last'][:160]}", flush=True)
            if n % args.progress == 0:
                print(f"... {n} runs, {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if snapshot is not None:
            shutil.rmtree(snapshot, ignore_errors=True)
    for mode in modes:
        report([r for r in results if r["mode"] == mode], args, mode, time.monotonic() - t0, prepare_s)
    if args.compare:
        compare(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["problems"] for r in results) else 0


def compare(results: list[dict]) -> None:
    by: defaultdict[int, dict[str, dict]] = defaultdict(dict)
    for r in results:
        by[r["index"]][r["mode"]] = r
    differ = [i for i, m in sorted(by.items())
              if len(m) == 2 and (sorted(m["fork"]["problems"]) != sorted(m["exec"]["problems"])
                                  or m["fork"]["code"] != m["exec"]["code"])]
    print(f"\nfork vs exec: {len(by)} cases, {len(differ)} with a different exit code or verdict")
    for i in differ[:40]:
        f, e = by[i]["fork"], by[i]["exec"]
        print(f"  case {i}: fork {f['code']} {f['problems']} ({f['last'][:80]}) | exec {e['code']} {e['problems']} "
              f"({e['last'][:80]})")


def report(results: list[dict], args: argparse.Namespace, mode: str, wall: float, prepare_s: float) -> None:
    if not results:
        return
    counts = Counter(p for r in results for p in set(r["problems"]))
    kinds = Counter(r["kind"] for r in results)
    codes = Counter(str(r["code"]) for r in results)
    slow = [r for r in results if not r["problems"] and r["cpu_s"] > args.slow_s]
    cpu = sum(r["cpu_s"] for r in results)
    sites = defaultdict(list)
    for r in results:
        if "traceback" in r["problems"] and r["site"]:
            sites[r["site"]].append(r["index"])
    print(f"\n[{mode}] {len(results):,} cases in {wall:.0f} s wall ({args.workers} worker(s); limits {args.cpu} CPU-s, "
          f"{args.wall:g} wall-s, {args.memory} MiB); children's CPU {cpu:.0f} s = {cpu / len(results):.3f} CPU-s "
          f"a case" + (f" (+ {prepare_s:.1f} s once, the fork server's imports)" if mode == "fork" else ""))
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print("exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    for c in CLASSES:
        print(f"  {c:14} {counts.get(c, 0)}")
    print(f"  {'clean':14} {sum(1 for r in results if not r['problems'])}")
    print(f"  slow (finished, over {args.slow_s:g} CPU-s): {len(slow)}"
          + (f"; slowest {max(r['cpu_s'] for r in slow):.1f} s (case {max(slow, key=lambda r: r['cpu_s'])['index']})"
             if slow else ""))
    print(f"  peak RSS: {max(r['maxrss_mib'] for r in results):.0f} MiB")
    if sites:
        print(f"traceback sites ({len(sites)}):")
        for site, idx in sorted(sites.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(idx):4} x {site}  (e.g. case {idx[0]})")


if __name__ == "__main__":
    sys.exit(main())
