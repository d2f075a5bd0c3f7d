"""Durations as people write them: '30m', '1.5h', '90s', '2d', '1800' (seconds)."""

from __future__ import annotations

import re

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?)?\s*$",
                  re.IGNORECASE)
_SCALE = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | float, default_unit: str = "s") -> float:
    """Seconds in `text`; a bare number is in `default_unit` (s, m, h or d)."""
    if isinstance(text, int | float):
        value, unit = float(text), default_unit
    else:
        m = _DUR.match(text)
        if not m:
            raise ValueError(f"not a duration: {text!r} (examples: 30m, 1.5h, 90s, 2d)")
        value, unit = float(m.group(1)), (m.group(2) or default_unit)
    if value <= 0:
        raise ValueError(f"duration must be > 0, got {text!r}")
    return value * _SCALE[unit[0].lower()]
