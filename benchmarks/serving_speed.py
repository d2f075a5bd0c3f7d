"""Speed of the serving planner's search, in CPU time, as a ratio to the previous release run
alongside (the commit before the step-time tables, unpacked with `git archive`), so that a busy
machine moves both: `plan serve` for Llama-3-70B at 1,000 req/s on H100 (15 replica shapes) and
with `--compare all` (every GPU type with a rental price), the search alone (imports and catalog
loading out of the timing). "cold" is the first search in a fresh process (no step time computed
yet: what the command pays), "warm" the same search again (what a sweep or a notebook pays).
The end-to-end command is benchmarks/cli_startup.py's. Each tree searches with its own
catalog: the previous release has fewer priced GPU types, so fewer shapes under `--compare all`
(both counts are printed); tests/plan/test_serve_golden.py holds the answers themselves.

    python benchmarks/serving_speed.py [--runs 3] [--previous COMMIT|none]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _previous import compiled, unpack

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = "73e3e77"  # the commit before the serving step-time tables (issue 14, item 6)
# One search, cold then warm, in whichever tree is on the path; the same calls in both trees.
SEARCH = """
import sys, time
from gpucluster.catalog import catalog
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.queueing import Lengths, Traffic
from gpucluster.plan.fabric_from import from_flags
from gpucluster.plan.serve_search import search
from gpucluster.specs.workload import load_model_spec
import numpy.fft
spec = load_model_spec("llama3-70b")
fabs = [from_flags("H100:8", 1, "NDR400", None).fabric]
if sys.argv[1] == "all":
    fabs += [from_flags(f"{n}:8", 1, "NDR400", None).fabric for n, g in catalog.gpus.items()
             if g.prices.rental_usd_per_gpu_hour and n != fabs[0].gpu_name]
traffic = Traffic(1000.0, Lengths(512.0), Lengths(256.0))
out = []
for _ in range(2):
    t = time.process_time()
    res = search(spec, fabs, 1000.0, traffic, quant=Quant("bf16", "bf16"), max_gpus_per_replica=64)
    out.append(time.process_time() - t)
best = res.best
print(*out, len(res.options), best.hardware, best.tp, best.pp, best.replicas)
"""
CASES = {"plan serve 70B (15 shapes)": "one", "plan serve --compare all": "all"}


def run(src: Path, case: str) -> tuple[float, float, str]:
    """(cold s, warm s, what it recommended) of one fresh process."""
    out = subprocess.run([sys.executable, "-c", SEARCH, case], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(src)}).stdout.split()
    return float(out[0]), float(out[1]), " ".join(out[2:])


def best_of(src: Path, case: str, runs: int) -> tuple[float, float, str]:
    results = [run(src, case) for _ in range(runs)]
    return min(r[0] for r in results), min(r[1] for r in results), results[0][2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per case (the least CPU time counts)")
    ap.add_argument("--previous", default=PREVIOUS, help="the release to compare with (a commit), or none")
    args = ap.parse_args(argv)
    now_src = compiled(ROOT / "src")
    with tempfile.TemporaryDirectory() as tmp:
        prev_src = unpack(args.previous, Path(tmp)) if args.previous != "none" else None
        print(f"{'search':28} {'cold s':>7} {'warm s':>7}" + (f" {'prev cold':>9} {'prev warm':>9} {'cold x prev':>11}"
                                                             f" {'warm x prev':>11}" if prev_src else ""))
        for name, case in CASES.items():
            cold, warm, rec = best_of(now_src, case, args.runs)
            line = f"{name:28} {cold:7.3f} {warm:7.3f}"
            if prev_src is not None:
                p_cold, p_warm, p_rec = best_of(prev_src, case, max(1, args.runs // 2))
                line += f" {p_cold:9.3f} {p_warm:9.3f} {cold / p_cold:11.2f} {warm / p_warm:11.2f}"
                # Its catalog is its own: a release with fewer priced GPU types searches fewer shapes.
                line += f"  (options, best: {rec}; previous: {p_rec})"
            else:
                line += f"  (options, best: {rec})"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
