"""The catalog's validated entries, kept between runs as Python keeps compiled modules.

Every command reads some of the catalog (GPUs, links, NICs, model presets): parsing those YAML
files, checking them and validating them into pydantic models took a third of `plan train`'s
start-up. So each family, once built, is pickled into catalog/__pycache__/ beside the data and
read back on the next start while nothing it came from has changed.

The key of a family's file covers the size and modification time of each of its data files and
of the code that defines and reads them (the models, the loaders), the file list itself (a GPU
added or removed), and the Python and pydantic versions: any change rebuilds it, from the files,
with every check and every error message as before. Only the catalog shipped in the package is
kept this way (not a GPUCLUSTER_CATALOG copy, nor a test's directory). Anything that cannot be
read or written (a read-only install, a file cut short) falls back to the YAML files silently;
GPUCLUSTER_NO_CACHE=1 turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

PACKAGE = Path(__file__).resolve().parents[1]
DATA_DIR = Path(__file__).resolve().parent / "data"
CACHE_DIR = Path(__file__).resolve().parent / "__pycache__"
# The code that decides what an entry is: a change to it must rebuild the entries.
CODE = [PACKAGE / p for p in ("catalog/models.py", "catalog/registry.py", "catalog/operations.py", "catalog/cache.py",
                              "registry.py", "specs/workload.py", "specs/loader.py", "specs/safe_yaml.py", "errors.py")]


def enabled(files: Iterable[Path]) -> bool:
    """Only the packaged catalog, and only when not turned off."""
    if os.environ.get("GPUCLUSTER_NO_CACHE", "") not in ("", "0"):
        return False
    # = all(Path(f).resolve().is_relative_to(DATA_DIR)), resolving each folder once: a family's
    # files share one or two, and a file that is not a link resolves to its folder's path + name.
    folders: dict[Path, Path] = {}
    for f in map(Path, files):
        if f.name in ("", ".", "..") or f.is_symlink():
            resolved = f.resolve()
        else:
            if f.parent not in folders:
                folders[f.parent] = f.parent.resolve()
            resolved = folders[f.parent] / f.name
        if not resolved.is_relative_to(DATA_DIR):
            return False
    return True


def key(family: str, files: Iterable[Path]) -> str:
    import pydantic

    h = hashlib.blake2b(digest_size=12)
    h.update(f"{family}\0{sys.version}\0{pydantic.VERSION}\0".encode())
    for path in [*sorted(Path(f) for f in files), *CODE]:
        try:
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        except OSError:
            h.update(f"{path}\0missing\0".encode())
    return h.hexdigest()


def cached(family: str, files: list[Path], build: Callable[[], T]) -> T:
    """build() (which reads `files`), or what it returned last time if nothing changed since."""
    if not enabled(files):
        return build()
    path = CACHE_DIR / f"catalog-{family}-{key(family, files)}.pickle"
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)  # our own file, in the package's own __pycache__
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, TypeError,
            ValueError):
        pass  # none yet, or cut short: built again below
    value = build()
    _store(path, family, value)
    return value


def _store(path: Path, family: str, value: object) -> None:
    import tempfile  # only when the catalog changed: not at every start

    try:
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".catalog-{family}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for old in path.parent.glob(f"catalog-{family}-{'?' * 24}.pickle"):  # this family's, older keys
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError):
        pass  # a read-only install: the files are read every time, as before
