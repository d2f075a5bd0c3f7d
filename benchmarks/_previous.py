"""The previous release's `src/`, for a benchmark to run beside the working tree's (one place
for benchmarks/cli_startup.py and benchmarks/training_speed.py)."""

from __future__ import annotations

import compileall
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compiled(src: Path) -> Path:
    """`src` with every module's bytecode written, so that no timed run compiles one: an
    installed release runs from bytecode, and PYTHONDONTWRITEBYTECODE (or a tree another process
    is editing) would otherwise leave one side compiling at every start."""
    compileall.compile_dir(str(src), quiet=1)
    return src


def unpack(commit: str, into: Path) -> Path | None:
    """`src/` of `commit`, unpacked with `git archive` into `into` and compiled (None without git
    or the commit)."""
    if shutil.which("git") is None:
        return None
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return compiled(into / "src")
