"""Writing an output file whole or not at all (a leaf module: every layer may use it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_atomically(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Write `text` to a temporary file in `path`'s folder, flush it to disk, give it `mode`
    (mkstemp makes 0600, which a reader running as another user could not open) and rename it
    over `path`: a reader never sees half a file, and a failure (OSError, Ctrl-C) leaves the old
    file as it was and no temporary file behind. OSError propagates for the caller to word."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
