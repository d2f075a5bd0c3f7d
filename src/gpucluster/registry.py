"""One registry per plugin family (GPUs, NICs, policies, rules, generators).

A registry maps canonical names (and aliases) to entries; looking up an unknown
name raises a `UserError` that lists the valid names, in the way SkyPilot does.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from gpucluster.errors import unknown_name

T = TypeVar("T")


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._canonical: dict[str, str] = {}  # key (canonical or alias) -> canonical name

    def add(self, name: str, entry: T, aliases: tuple[str, ...] | list[str] = ()) -> T:
        for n in (name, *aliases):
            k = _key(n)
            if k in self._canonical and self._canonical[k] != name:
                raise ValueError(f"{self.kind} name {n!r} is used by {self._canonical[k]!r} and {name!r}")
            self._canonical[k] = name
        self._entries[name] = entry
        return entry

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator form, for plugin classes and functions."""
        def deco(obj: T) -> T:
            return self.add(name, obj, aliases)
        return deco

    def canonical(self, name: str, *, field: str | None = None, file: str | None = None,
                  line: int | None = None) -> str:
        try:
            return self._canonical[_key(name)]
        except KeyError:
            close = difflib.get_close_matches(_key(name), list(self._canonical), n=3, cutoff=0.5)
            suggest = list(dict.fromkeys(self._canonical[c] for c in close))
            raise unknown_name(self.kind, name, self._entries, suggest=suggest,
                               field=field, file=file, line=line) from None

    def get(self, name: str, **where) -> T:
        return self._entries[self.canonical(name, **where)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _key(name) in self._canonical

    def names(self) -> list[str]:
        return list(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)
