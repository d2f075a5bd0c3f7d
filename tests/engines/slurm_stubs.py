"""Stub Slurm programs (sbatch, squeue, sacct, scontrol) on PATH that print what a test gives
them, bytes of any encoding and size: the programs we call are untrusted input (issue 23 item 2).
Shared by tests/engines/test_slurm_hostile.py and the fuzzer's `slurm` kind."""

from __future__ import annotations

import os
from pathlib import Path

PROGRAMS = ("sbatch", "squeue", "sacct", "scontrol", "scancel")


def install(bin_dir: Path, outputs: dict[str, bytes | str], *, codes: dict[str, int] | None = None,
            stderr: dict[str, bytes] | None = None) -> dict[str, str]:
    """Write the stubs into `bin_dir`; returns the environment that puts them first on PATH.
    `outputs[name]`: the bytes it prints, or "!yes" (prints without end), "!sleep" (never ends);
    a program not given prints nothing and exits 1 (the job is unknown to it)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    codes = codes or {}
    stderr = stderr or {}
    for name in PROGRAMS:
        out = outputs.get(name)
        lines = ["#!/bin/sh"]
        if isinstance(out, str) and out == "!yes":
            lines.append("exec yes 'JobID|Submit|State|xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'")
        elif isinstance(out, str) and out == "!sleep":
            lines.append("exec sleep 100")
        else:
            if name in stderr:
                (bin_dir / f"{name}.err").write_bytes(stderr[name])
                lines.append(f"cat '{bin_dir}/{name}.err' >&2")
            if out is not None:
                (bin_dir / f"{name}.out").write_bytes(out if isinstance(out, bytes) else out.encode())
                lines.append(f"cat '{bin_dir}/{name}.out'")
            lines.append(f"exit {codes.get(name, 0 if out is not None else 1)}")
        path = bin_dir / name
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
