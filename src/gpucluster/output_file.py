"""The one writer of output files (`-o`, `--html`, `--metrics`, `--events`, `--scenario`): every
failure is one `UserError` line naming the option and the file, never a traceback.

What it turns into one line: a folder, a missing or read-only folder, a name too long for the
system (ENAMETOOLONG), a NUL byte, a loop of symbolic links (pathlib raises RuntimeError), a
device, pipe or socket (files.replaceable: never renamed over, never opened, so a FIFO with no
reader cannot block and /dev/full cannot fail half way), a full disk or a quota while writing.
The file appears whole or not at all (files.replace_atomically); a stream (`--events`) is
written to a temporary file beside the target and renamed over it when the run ends, so an
interrupted start leaves no 0-byte file and no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Any

from gpucluster.errors import UserError
from gpucluster.files import replace_atomically, replaceable

MAX_NAME_QUOTED = 200   # characters of a file name quoted in an error line


def shown_name(path: Any) -> str:
    text = str(path)
    return text if len(text) <= MAX_NAME_QUOTED else text[:MAX_NAME_QUOTED] + f"... ({len(text):,} characters)"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RuntimeError):          # pathlib's "Symlink loop from ..."
        return "a loop of symbolic links"
    if isinstance(exc, ValueError):            # a NUL byte in the name
        return "not a valid file name"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def check_output_path(path: str | os.PathLike[str], field: str) -> Path:
    """The file a write to `path` will replace, or one line saying why it cannot be written: checked
    before any work, so a long run does not end in a write that fails."""
    name = shown_name(path)
    try:
        given = Path(os.fspath(path)).expanduser()
        if not str(given) or str(given).endswith(os.sep):
            raise UserError("give a file name", file=name, field=field)
        if given.is_dir():
            raise UserError("is a folder, expected a file name", file=name, field=field)
        folder = given.parent
        if not folder.is_dir():
            raise UserError(f"folder {shown_name(folder)!r} does not exist; create it or choose another path",
                            file=name, field=field)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(f"cannot write in folder {shown_name(folder)!r}: permission denied",
                            file=name, field=field)
        return replaceable(given)
    except (OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"cannot write: {_reason(exc)}", file=name, field=field) from None


def write_output(path: str | os.PathLike[str], text: str, *, field: str, mode: int = 0o644) -> Path:
    """Write `text` to `path` whole or not at all; any failure is one UserError line."""
    target = check_output_path(path, field)
    try:
        replace_atomically(target, text, mode)
    except (OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"cannot write: {_reason(exc)}", file=shown_name(path), field=field) from None
    return target


class StreamOutput:
    """A file written as a run goes (an event log): a temporary file beside the target, renamed
    over it by `commit()`; `discard()` (or leaving the `with` block by an exception) removes it.
    A write that fails (a full disk) is one UserError line."""

    def __init__(self, path: str | os.PathLike[str], *, field: str, mode: int = 0o644) -> None:
        self.path, self.field, self.mode = path, field, mode
        self.target = check_output_path(path, field)
        try:
            fd, self.tmp = tempfile.mkstemp(dir=self.target.parent, prefix=f".{self.target.name[:100]}.",
                                            suffix=".tmp")
        except OSError as exc:
            raise self._error(exc) from None
        self.file: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8")

    def _error(self, exc: BaseException) -> UserError:
        return UserError(f"cannot write: {_reason(exc)}", file=shown_name(self.path), field=self.field)

    def write(self, text: str) -> None:
        assert self.file is not None
        try:
            self.file.write(text)
        except OSError as exc:
            self.discard()
            raise self._error(exc) from None

    def commit(self) -> Path:
        if self.file is None:
            return self.target
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            self.file = None
            os.chmod(self.tmp, self.mode)
            os.replace(self.tmp, self.target)
        except OSError as exc:
            self.discard()
            raise self._error(exc) from None
        return self.target

    def discard(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None
        try:
            os.unlink(self.tmp)
        except OSError:
            pass

    def __enter__(self) -> StreamOutput:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()
