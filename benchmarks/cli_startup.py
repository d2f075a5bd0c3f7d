"""Start-up time of the console script, as a ratio to a bare interpreter start measured in the same
run (`python -c pass`), so that a busy machine slows both sides alike. The absolute target
(`--help` and `catalog` under 0.5 s on an idle machine) is printed alongside; the verdict uses the
ratio. This is where start-up time is checked: the test suite asserts no wall-clock times.

    python benchmarks/cli_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXE = Path(sys.executable).parent / "gpucluster"
COMMANDS = [["--help"], ["catalog"], ["catalog", "H100"], ["comm", "--gpu", "H100:8"]]
TARGET_S = 0.5          # `--help` and `catalog` on an idle machine
TARGET_RATIO = 25.0     # the same, as a multiple of `python -c pass` (about 20 ms idle): 0.5 s / 20 ms


def _median(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args(argv).runs
    ok = True
    bare = _median([sys.executable, "-c", "pass"], runs)
    print(f"python -c pass{'':18} median {bare:.3f} s over {runs} runs (the baseline)")
    for args in COMMANDS:
        med = _median([str(EXE), *args], runs)
        ratio = med / bare if bare > 0 else float("inf")
        checked = args in (["--help"], ["catalog"])
        verdict = "" if not checked else (" PASS" if ratio <= TARGET_RATIO else " FAIL")
        ok &= verdict != " FAIL"
        print(f"gpucluster {' '.join(args):20} median {med:.3f} s = {ratio:5.1f} x python -c pass"
              + (f" (target <= {TARGET_RATIO:g} x, ~{TARGET_S} s idle){verdict}" if checked else ""))
    bare_after = _median([sys.executable, "-c", "pass"], runs)
    if bare_after > 1.5 * bare or bare > 1.5 * bare_after:
        print(f"note: the baseline moved during the run ({bare:.3f} -> {bare_after:.3f} s): the machine is busy, "
              "ratios are rough")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
