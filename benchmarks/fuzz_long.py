"""The long fuzz run: N mutated-input cases (default 10,000), each `gpucluster` run in its own
process under a CPU-seconds and address-space limit and a wall-clock limit; prints how many
ended in a traceback, a hang, a memory blow-up, a crash, an exit-2 error that was not one line,
eaten markup or a control character on the terminal.

    .venv/bin/python benchmarks/fuzz_long.py                 # 10,000 cases, one per CPU
    .venv/bin/python benchmarks/fuzz_long.py -n 1000 --workers 2 --keep /tmp/fuzz-failures

Cases come from tests/fuzz/fuzz_cases.py (the same generator and oracle as the pytest slice,
here with every command kind: plan, check, simulate and traces included), seeded by their
index, so `--first K -n 1` reruns case K. Exit 1 when any case broke a promise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from fuzz_cases import RandomSource, classify, make_case  # noqa: E402

EXE = Path(sys.executable).parent / "gpucluster"
CLASSES = ("traceback", "hang", "memory", "crash", "not-one-line", "markup", "escape")


# The limits are set in the child, then it becomes gpucluster (exec): preexec_fn is not safe
# with threads, and prlimit after the start would race the first allocations.
LIMIT_AND_EXEC = """import os, resource, sys
cpu, mem = int(sys.argv[1]), int(sys.argv[2]) * 2**20
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))       # SIGXCPU, then SIGKILL
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
os.execv(sys.argv[3], sys.argv[3:])
"""


def run_case(index: int, folder: Path, args: argparse.Namespace) -> dict:
    case = make_case(RandomSource(index), slow=not args.fast_only)
    folder.mkdir(parents=True, exist_ok=True)
    case.write(folder)
    argv = case.args(folder)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}
    with open(folder / ".stdout", "wb") as out, open(folder / ".stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", LIMIT_AND_EXEC, str(args.cpu), str(args.memory), str(EXE),
                                 *argv], stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=folder, env=env,
                                start_new_session=True)
        deadline, status, usage = time.monotonic() + args.wall, None, None
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = st, ru
            elif time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                status = "wall"
            else:
                time.sleep(0.02)
        proc.returncode = 0                      # reaped here: keep Popen from waiting again
    stdout = (folder / ".stdout").read_text("utf-8", "replace")
    stderr = (folder / ".stderr").read_text("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
    if status == "wall":
        code: int | str = "timeout"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        code = "timeout" if sig in (signal.SIGXCPU, signal.SIGKILL) else f"signal {sig}"
    else:
        code = os.WEXITSTATUS(status)
    if isinstance(code, str) and code.startswith("signal"):
        problems = ["crash"]
    else:
        problems = classify("memory" if "MemoryError" in stderr and code not in (0, 2) else code, stdout, stderr)
    return {"index": index, "kind": case.kind, "note": case.note, "argv": [a.replace(str(folder), "{dir}") for a in argv],
            "code": code, "cpu_s": round(cpu, 2), "problems": problems, "site": _site(stderr),
            "last": (stderr.strip().splitlines() or [""])[-1][:300]}


def _site(stderr: str) -> str | None:
    """The innermost gpucluster frame of a traceback: where the fix goes."""
    frames = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith('File "') and "gpucluster" in ln]
    return frames[-1].split("gpucluster/", 1)[-1] if frames else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--cases", type=int, default=10_000)
    ap.add_argument("--first", type=int, default=0, help="index of the first case (cases are seeded by index)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cpu", type=int, default=20, help="CPU seconds per case before it counts as a hang")
    ap.add_argument("--wall", type=float, default=60.0, help="wall seconds per case before it counts as a hang")
    ap.add_argument("--memory", type=int, default=3072, help="address space per case, MiB")
    ap.add_argument("--slow-s", type=float, default=5.0, help="CPU seconds above which a finished case is 'slow'")
    ap.add_argument("--fast-only", action="store_true", help="only the commands of the pytest slice")
    ap.add_argument("--keep", type=Path, help="copy the files of every failing case here")
    ap.add_argument("--json", type=Path, help="write every result here")
    args = ap.parse_args()
    if not EXE.exists():
        sys.exit(f"{EXE} missing: install the package (make install)")
    work = Path(tempfile.mkdtemp(prefix="gpucluster-fuzz-"))
    results: list[dict] = []
    t0 = time.monotonic()

    def one(i: int) -> dict:
        folder = work / str(i)
        try:
            r = run_case(i, folder, args)
            if r["problems"] and args.keep:
                shutil.copytree(folder, args.keep / str(i), dirs_exist_ok=True)
            return r
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    try:
        with ThreadPoolExecutor(args.workers) as pool:
            for n, r in enumerate(pool.map(one, range(args.first, args.first + args.cases)), 1):
                results.append(r)
                if r["problems"]:
                    print(f"case {r['index']} {r['kind']} {r['problems']}: gpucluster {' '.join(r['argv'])!r} "
                          f"({r['note'][:80]}) -> {r['code']}: {r['last'][:160]}", flush=True)
                if n % 250 == 0:
                    print(f"... {n} cases, {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, args, time.monotonic() - t0)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["problems"] for r in results) else 0


def report(results: list[dict], args: argparse.Namespace, wall: float) -> None:
    counts = Counter(p for r in results for p in set(r["problems"]))
    kinds = Counter(r["kind"] for r in results)
    codes = Counter(str(r["code"]) for r in results)
    slow = [r for r in results if not r["problems"] and r["cpu_s"] > args.slow_s]
    sites = defaultdict(list)
    for r in results:
        if "traceback" in r["problems"] and r["site"]:
            sites[r["site"]].append(r["index"])
    print(f"\n{len(results):,} cases in {wall:.0f} s ({args.workers} workers; limits {args.cpu} CPU-s, "
          f"{args.wall:g} wall-s, {args.memory} MiB)")
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print("exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    for c in CLASSES:
        print(f"  {c:14} {counts.get(c, 0)}")
    print(f"  {'clean':14} {sum(1 for r in results if not r['problems'])}")
    print(f"  slow (finished, over {args.slow_s:g} CPU-s): {len(slow)}"
          + (f"; slowest {max(r['cpu_s'] for r in slow):.1f} s" if slow else ""))
    if sites:
        print(f"traceback sites ({len(sites)}):")
        for site, idx in sorted(sites.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(idx):4} x {site}  (e.g. case {idx[0]})")


if __name__ == "__main__":
    sys.exit(main())
