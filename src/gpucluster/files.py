"""Writing an output file whole or not at all (a leaf module: every layer may use it)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


def replace_atomically(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Write `text` to a temporary file in `path`'s folder, flush it to disk, give it `mode`
    (mkstemp makes 0600, which a reader running as another user could not open) and rename it
    over `path`: a reader never sees half a file, and a failure (OSError, Ctrl-C) leaves the old
    file as it was and no temporary file behind. OSError propagates for the caller to word."""
    target = replaceable(path)
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


def replaceable(path: str | os.PathLike[str]) -> Path:
    """The file a rename should replace for `path`: the file a symbolic link names (the link
    stays a link), refused with OSError(EINVAL) for anything but a regular file or a new name.
    Renaming over /dev/null as root would turn the device into a regular file for every program
    on the machine, over /dev/stdout would replace the link itself, over a named pipe cut off
    its reader: devices, /proc, pipes, sockets and folders are never replaced."""
    given = os.path.abspath(path)
    real = os.path.realpath(given)
    for p in (given, real):
        if p == "/dev" or p.startswith(("/dev/", "/proc/", "/sys/")) or p in ("/proc", "/sys"):
            raise OSError(errno.EINVAL, "a device or system file, not a file to replace: give a file name "
                                        "(or leave the option out to print)", str(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return Path(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a folder, device, pipe or socket): give a file name",
                      str(path))
    return Path(real)


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` names a regular file; False, not an OSError, for a name the system cannot
    even look up (too long, a loop of links): pathlib's is_file raises ENAMETOOLONG."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):   # ValueError: a NUL byte in the name
        return False
