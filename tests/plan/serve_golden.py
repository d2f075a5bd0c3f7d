"""`plan serve --json` documents for a few requests, as tests/plan/data/serve_golden.json holds them
(computed at commit 73e3e77, before the serving planner was sped up; regenerate only on purpose:
`python tests/plan/serve_golden.py > tests/plan/data/serve_golden.json`)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

CASES = {
    "llama3-70b on H100, 1000 req/s": ["--model", "llama3-70b", "--gpu", "H100:8", "--rate", "1000"],
    "llama3-8b, SLOs, exponential lengths, fp8, three GPU types": [
        "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "50k", "--slo-ttft", "300ms", "--slo-tpot", "40ms",
        "--lengths", "exponential", "--precision", "fp8", "--compare", "H200,MI300X"],
    "mixtral-8x7b on A100, uniform lengths": ["--model", "mixtral-8x7b", "--gpu", "A100-SXM4-80GB:8", "--rate", "200",
                                              "--input", "2048", "--output", "128", "--lengths", "uniform"],
}


def run_one(args: list[str]) -> dict:
    from gpucluster.cli.app import main

    out = io.StringIO()
    old = sys.argv
    sys.argv = ["gpucluster", "plan", "serve", *args, "--json"]
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main()
    finally:
        sys.argv = old
    doc = json.loads(out.getvalue())
    # The intervals come from the calibrated table (catalog/data/intervals.yaml), regenerated after
    # every model change; the golden file pins the recommendations, not them.
    for dep in [doc.get("best", {}), *doc.get("alternatives", [])]:
        dep.pop("intervals", None)
    return doc


def run() -> dict[str, dict]:
    return {name: run_one(args) for name, args in CASES.items()}


if __name__ == "__main__":
    json.dump(run(), sys.stdout, indent=1)
    print()
