"""Writing a generated file: the folder is checked first, the file appears whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from gpucluster.errors import UserError
from gpucluster.files import replace_atomically, replaceable


def check_out_path(out: str) -> Path:
    """One line, exit 2, for an -o path that cannot be written, before anything is generated."""
    path = Path(out)
    folder = path.parent
    try:
        if path.is_dir():
            raise UserError("is a folder, expected a file name", file=out, field="--out")
        if not folder.is_dir():
            raise UserError(f"folder {str(folder)!r} does not exist", file=out, field="--out")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(f"folder {str(folder)!r} is not writable", file=out, field="--out")
        replaceable(path)           # a device, /proc, a pipe or a socket is never replaced
    except (OSError, ValueError) as exc:       # a name too long, a NUL byte in it
        raise UserError(f"cannot write: {getattr(exc, 'strerror', None) or exc}", file=out[:200], field="--out") from None
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(out: str, text: str, executable: bool = False) -> None:
    """Write to a temporary file in the same folder, then rename it over `out`: a reader (or a
    scheduler picking the script up) never sees half a file, and a failed write leaves the old
    file as it was."""
    path = check_out_path(out)
    try:
        replace_atomically(path, text, (0o777 if executable else 0o666) & ~_umask())
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=out, field="--out") from None
