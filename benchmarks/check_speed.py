"""Wall time of `gpucluster check` on every example cluster with every sample job
(target: each run under 5 s, so the doctor fits in a pre-submit hook or CI step).

    python benchmarks/check_speed.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "gpucluster"
TARGET_S = 5.0


def main() -> int:
    jobs = [a for j in sorted((ROOT / "examples" / "jobs").iterdir()) for a in ("--job", str(j))]
    ok = True
    specs = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "examples" / "seed-figures").glob("*.yaml"))
    for spec in specs:
        t = time.perf_counter()
        proc = subprocess.run([str(EXE), "check", str(spec), *jobs, "--json"], capture_output=True, text=True)
        dt = time.perf_counter() - t
        if proc.returncode not in (0, 1):
            print(f"{spec.name}: exit {proc.returncode}: {proc.stderr.strip()}")
            ok = False
            continue
        verdict = "PASS" if dt <= TARGET_S else "FAIL"
        ok &= verdict == "PASS"
        print(f"check {spec.relative_to(ROOT)!s:45} {len(jobs) // 2} job files  {dt:5.2f} s  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
