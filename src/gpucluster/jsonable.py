"""Values as strict JSON prints them: an infinite or undefined number (a break-even that never
comes) is null, and numpy scalars are plain numbers. A leaf module: the terminal printer and
the sweep engine (a lower layer) share it."""

from __future__ import annotations

import math
from typing import Any


def finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        return finite(obj.item())
    return obj
