"""What published sources count, and which software they ran, where their cases do not say.

The validation format states the hardware, model and layout; two facts that change
the comparison are left to the source's conventions (shared/validation/README.md,
"Notes on what the sources count"):

- Fused (flash) attention: FlashAttention appeared in mid 2022 and reached Megatron-LM
  and NeMo in 2023. Runs published before 2023 materialised the s x s scores in HBM
  (Korthikanti et al. 2022 count their memory in Table 2), so a source dated before
  2023 is predicted with unfused attention.
- TFLOP/s: Megatron-style "model TFLOP/s" excludes recompute, except Narayanan et
  al. 2021, whose throughput formula (Appendix, 96 B s l h^2 ...) counts the extra
  forward pass of activation recomputation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIRST_YEAR_WITH_FUSED_ATTENTION = 2023
TFLOPS_WITH_RECOMPUTE = (re.compile(r"narayanan\s+et\s+al\.?\s*,?\s*2021", re.IGNORECASE),)


@dataclass(frozen=True)
class Conventions:
    flash_attention: bool
    tflops_include_recompute: bool


def source_year(source: str | None) -> int | None:
    """The publication year named in a source string ("... 2022, Table 5"); NeMo/Megatron
    release tags such as "NeMo 24.12" read as 2024."""
    if not source:
        return None
    years = [int(y) for y in re.findall(r"\b(20[0-9]{2})\b", source)]
    if years:
        return max(years)
    tag = re.search(r"\b(?:nemo|megatron[- ]?(?:lm|core|bridge)?)\s*v?(2[0-9])\.(0?[1-9]|1[0-2])\b", source, re.I)
    return 2000 + int(tag.group(1)) if tag else None


def conventions_for(source: str | None) -> Conventions:
    year = source_year(source)
    flash = year is None or year >= FIRST_YEAR_WITH_FUSED_ATTENTION
    recompute = any(p.search(source or "") for p in TFLOPS_WITH_RECOMPUTE)
    return Conventions(flash_attention=flash, tflops_include_recompute=recompute)
