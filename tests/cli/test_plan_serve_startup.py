"""What `plan serve` loads at start: numpy's OpenBLAS without its thread pool (the command makes no
BLAS call; the pool's threads spin as it loads), the environment left as it was, and none of the modules `plan train` keeps off its
path. Start-up time itself is measured by benchmarks/cli_startup.py, never asserted here."""

import os
import subprocess
import sys

import pytest

_CODE = ("import os, sys\nfrom gpucluster.cli.app import main\nsys.argv = ['gpucluster', *sys.argv[1:]]\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]\n"
         "print(threads, os.environ.get('OPENBLAS_NUM_THREADS'), *sys.modules, file=sys.stderr)")
_ARGV = ("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "10", "--top", "1")


def _run(env: dict[str, str]) -> tuple[int, str, set[str]]:
    proc = subprocess.run([sys.executable, "-c", _CODE, *_ARGV], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    threads, blas, *mods = proc.stderr.split()
    return int(threads), blas, set(mods)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="thread count read from /proc")
def test_plan_serve_starts_no_blas_threads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    threads, blas, mods = _run(env)
    assert "numpy" in mods and "gpucluster.plan.serve_search" in mods
    assert blas == "None"  # set only while numpy loads
    assert threads == 1
    assert not {"typer._adapters", "pydantic.plugin._loader", "numpy.random"} & mods


def test_plan_serve_keeps_the_users_blas_threads() -> None:
    _, blas, _ = _run({**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert blas == "2"
