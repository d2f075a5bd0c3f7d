"""Start-up and end-to-end CPU time of the console script, as ratios that a busy machine does not
move much: to a bare interpreter start (`python -c pass`) and to the previous release, both
measured in the same run. The test suite asserts no times: this is where they are checked.

Targets (issue 14, one core, idle machine): `--help` <= 0.15 s, `plan train` for Llama-3.1-405B
on 16,384 H100 <= 0.4 s, `plan serve` <= 0.3 s, `plan serve --compare all` <= 1.5 s. On a shared
machine absolute seconds swing 2x with the load, so the verdict compares each command with the
previous release run alongside it: the target divided by that release's idle figure (measured
when the issue was filed) is the ratio to reach. The previous release is the commit before the
start-up work (PREVIOUS below), unpacked with `git archive` into a temporary directory; without
git, its recorded figures stand in. Both trees are compiled to bytecode first (_previous.py).

    python benchmarks/cli_startup.py [--runs 5] [--previous COMMIT|none]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from _previous import compiled, unpack

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = "73e3e77"  # the commit before the start-up work (issue 14, item 6)
RUN = "import sys; sys.argv[0] = 'gpucluster'; from gpucluster.cli.app import main; main()"
# What `plan serve` imports before any of this project's code runs: the CLI (typer), the tables
# (rich), the catalog's and specs' models (pydantic) and the serving model's arrays (numpy), with
# one BLAS thread as the command loads it. Its ratio to the previous release's `plan serve` is the
# least that command's ratio can be while it keeps these four libraries.
FLOOR = ("import os; os.environ['OPENBLAS_NUM_THREADS'] = '1'; import typer, rich.console, rich.table, numpy; "
         "from pydantic import BaseModel")

# name -> (arguments, target s on an idle core, the previous release's idle s when the issue was
# filed: `--help` 0.26-0.41, `plan train` 0.87, `plan serve` 1.3, `--compare all` 6). `catalog` has
# no target of its own: it must not get slower (its previous figure stands for the target).
COMMANDS: dict[str, tuple[list[str], float, float]] = {
    "--help": (["--help"], 0.15, 0.33),
    "catalog": (["catalog"], 0.5, 0.5),
    "plan train 405B x 16384": (["plan", "train", "--model", "llama3.1-405b", "--gpu", "H100:8", "--nodes", "2048",
                                 "--global-batch", "2048"], 0.4, 0.87),
    "plan serve 70B": (["plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "1000"], 0.3, 1.3),
    "plan serve --compare all": (["plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "1000",
                                  "--compare", "all"], 1.5, 6.0),
}


def cpu_s(argv: list[str], env: dict[str, str] | None = None) -> float:
    """user + sys CPU seconds of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, capture_output=True, check=True, env=env, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(argv: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    return min(cpu_s(argv, env) for _ in range(runs))


def _tree_env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "160"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per command (the least CPU time counts)")
    ap.add_argument("--previous", default=PREVIOUS, help="the release to compare with (a commit), or none")
    args = ap.parse_args(argv)
    py = sys.executable
    now_env = _tree_env(compiled(ROOT / "src"))
    cpu_s([py, "-c", RUN, "plan", "train", "--model", "llama3-8b", "--gpu", "H100:8"], now_env)  # warm caches
    bare = best([py, "-c", "pass"], args.runs)
    print(f"python -c pass: {bare:.3f} s CPU (the bare interpreter; least of {args.runs} runs)")
    ok, prev_of = True, {}
    with tempfile.TemporaryDirectory() as tmp:
        prev_src = unpack(args.previous, Path(tmp)) if args.previous != "none" else None
        print(f"previous release: {args.previous + ' (unpacked, run alongside)' if prev_src else 'recorded idle figures'}")
        print(f"{'command':28} {'CPU s':>6} {'x pass':>7} {'previous':>9} {'x prev':>7} {'target x prev':>14}")
        for name, (cmd, target, prev_idle) in COMMANDS.items():
            # The two trees in turn, so that a change in the machine's load moves both.
            now_runs, prev_runs = [], []
            for i in range(args.runs):
                now_runs.append(cpu_s([py, "-c", RUN, *cmd], now_env))
                if prev_src and i < max(1, args.runs // 2):
                    prev_runs.append(cpu_s([py, "-c", RUN, *cmd], _tree_env(prev_src)))
            now, prev = min(now_runs), min(prev_runs) if prev_runs else prev_idle
            ratio, goal = now / prev, target / prev_idle
            prev_of[name] = (prev, goal)
            verdict = "PASS" if ratio <= goal else "FAIL"
            ok &= verdict == "PASS"
            print(f"{name:28} {now:6.3f} {now / max(bare, 1e-3):7.1f} {prev:9.3f} {ratio:7.2f} "
                  f"{'<= ' + format(goal, '.2f'):>14} {verdict}  (target {target} s idle)")
    prev, goal = prev_of["plan serve 70B"]
    floor = best([py, "-c", FLOOR], args.runs)
    print(f"{'  its libraries, nothing run':28} {floor:6.3f} {floor / max(bare, 1e-3):7.1f} {prev:9.3f} "
          f"{floor / prev:7.2f} {'<= ' + format(goal, '.2f'):>14}  (typer, rich, pydantic, numpy imported)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
