"""Parsing and printing of quantities. Sizes follow nccl-tests: K, M, G are powers of 1024."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_POW = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_bytes(text: str | int) -> int:
    """'8', '128K', '8G', '1GiB' -> bytes (binary prefixes, as nccl-tests -b/-e read them)."""
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(text)
        if not m:
            raise ValueError(f"not a size: {text[:60]!r} (examples: 8, 64K, 128M, 8G)")
        number = float(m.group(1)) * 1024 ** _POW[m.group(2).upper()]
        if number > 2**62:      # 400 digits read as inf: int(inf) raised OverflowError (issue 23)
            raise ValueError(f"size must be at most 2**62 bytes, got {text[:60]!r}")
        value = int(number)
    if value < 0:
        raise ValueError(f"size must be >= 0, got {text!r}")
    return value


def format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """nccl-tests' -b MIN -e MAX -f FACTOR sequence."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 < min <= max, got min={min_bytes} max={max_bytes}")
    if factor < 2:
        raise ValueError(f"step factor must be >= 2, got {factor}")
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= factor
    return sizes


_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([KMBGT]?)\s*$", re.IGNORECASE)
_DECIMAL = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(text: str) -> int:
    """'15T', '300B', '2.5M', '1e12' -> a count (decimal prefixes, as token budgets are quoted)."""
    m = _COUNT.match(text)
    if not m:
        raise ValueError(f"not a count: {text!r} (examples: 15T, 300B, 2e12)")
    value = float(m.group(1)) * _DECIMAL[m.group(2).upper()]
    if value <= 0:
        raise ValueError(f"must be > 0, got {text!r}")
    if not value <= MAX_COUNT:                # 1e999T is inf: int() of it raised OverflowError
        raise ValueError(f"at most {MAX_COUNT:.0e} (a quintillion), got {text[:40]!r}")
    return int(value)


MAX_COUNT = 1e18                  # tokens: the largest published training runs use ~4e13


def format_duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / (365.25 * 86400):.1f} years"
