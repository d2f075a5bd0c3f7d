"""Moved to `gpucluster.safe_text` (a leaf module: engines and reports use it too); kept so
that existing imports keep working."""

from gpucluster.safe_text import one_line, plain, safe

__all__ = ["one_line", "plain", "safe"]
