"""Writing a generated file: the folder is checked first, the file appears whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path



def check_out_path(out: str) -> Path:
    """One line, exit 2, for an -o path that cannot be written, before anything is generated: the
    one writer's check (output_file.py; a dangling link passed the check here and failed at the
    write, after the warnings had been printed: two lines on exit 2)."""
    from gpucluster.output_file import check_output_path

    return check_output_path(out, "--out")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(out: str, text: str, executable: bool = False) -> None:
    """Write to a temporary file in the same folder, then rename it over `out`: a reader (or a
    scheduler picking the script up) never sees half a file, and a failed write leaves the old
    file as it was."""
    from gpucluster.output_file import write_output

    write_output(out, text, field="--out", mode=(0o777 if executable else 0o666) & ~_umask())
