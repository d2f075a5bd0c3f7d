"""Start-up time of the console script (target: `--help` and `catalog` under 0.5 s).

    python benchmarks/cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

EXE = Path(sys.executable).parent / "gpucluster"
COMMANDS = [["--help"], ["catalog"], ["catalog", "H100"], ["comm", "--gpu", "H100:8"]]


def main() -> int:
    ok = True
    for args in COMMANDS:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([str(EXE), *args], capture_output=True, check=True)
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        target = 0.5 if args in (["--help"], ["catalog"]) else None
        verdict = "" if target is None else (" PASS" if med <= target else " FAIL")
        ok &= verdict != " FAIL"
        print(f"gpucluster {' '.join(args):28} median {med:.3f} s over 5 runs"
              + (f" (target <= {target} s){verdict}" if target else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
