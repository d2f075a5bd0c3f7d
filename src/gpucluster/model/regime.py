"""Which regime a prediction falls in: how much of what it rests on was checked against
published runs. The calibrated intervals (model/uncertainty.py, catalog/data/intervals.yaml)
are kept per regime, because the model is far more accurate where it was validated.

A regime is a tuple of yes/no features, in the order the pooling hierarchy drops them (last
first) when a regime has too few cross-validated cases of its own:

training: moe, chip_measured, framework_validated, attention_validated, scale_validated
serving:  moe, chip_measured, engine_validated

- moe: the model has routed experts (experts > 1). MoE is kept to the last because its
  errors (dispatch, imbalance, grouped GEMMs) are of another kind than a dense model's.
- chip_measured: the chip and precision (fp16 and bf16 run at one rate) have published
  training runs (serving: serving measurements) in the public files.
- framework_validated / engine_validated: the stack (`training.framework`, `serving.engine`;
  the documented default where a case does not state one) has public runs.
- attention_validated: the attention kernel (`unfused`, or the fused kernel's name;
  `flash` and `default` name the stack's default fused kernel) has public runs.
- scale_validated: neither the GPU count nor the sequence length is above the largest of
  the public runs (a smaller run is a simpler case of the same physics, not an extrapolation).

The *validated* sets are data (intervals.yaml `validated:`), computed from the public files
by benchmarks/calibrate_intervals.py; in its cross-validation they are computed from the
other sources only, so a held-out source is classified as a new one would be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TRAINING_FEATURES = ("moe", "chip_measured", "framework_validated", "attention_validated", "scale_validated")
SERVING_FEATURES = ("moe", "chip_measured", "engine_validated")
# The value of each feature that means "not checked on public data": a regime pooled over
# such a feature is widened (model/uncertainty.py lookup).
UNVALIDATED = {"moe": True, "chip_measured": False, "framework_validated": False, "attention_validated": False,
               "scale_validated": False, "engine_validated": False}
_SAME_RATE = {"fp16": "bf16"}
# The stack a case or plan runs when it does not say (validate/training_predictor.py: Megatron-like
# stacks; the serving predictor: the engine of the file's benchmarks). Documented in docs/validation.md.
DEFAULT_FRAMEWORK = "megatron"
DEFAULT_ENGINE = "default"
_FUSED_DEFAULT = {"flash", "default", "fused"}

_TEXT = {"moe": ("MoE", "dense"), "chip_measured": ("chip measured", "chip not measured"),
         "framework_validated": ("framework validated", "framework not validated"),
         "attention_validated": ("attention kernel validated", "attention kernel not validated"),
         "scale_validated": ("scale within the public runs", "scale above the largest public run"),
         "engine_validated": ("engine validated", "engine not validated")}


def chip_key(gpu: str, precision: str) -> str:
    return f"{gpu} {_SAME_RATE.get(precision, precision)}"


def attention_name(attention: str | None, fused: bool = True) -> str:
    """`unfused`, or the fused kernel's name with the aliases of the default folded in."""
    if not fused or attention == "unfused":
        return "unfused"
    return "flash" if attention is None or attention in _FUSED_DEFAULT else attention


def describe(features: Mapping[str, bool]) -> str:
    return ", ".join(_TEXT[k][0 if v else 1] for k, v in features.items())


@dataclass(frozen=True)
class Validated:
    """What the public runs cover (training or serving)."""
    chips: frozenset[str] = frozenset()
    frameworks: frozenset[str] = frozenset()
    attention: frozenset[str] = frozenset()
    gpus: tuple[int, int] | None = None
    seq_len: tuple[int, int] | None = None

    @classmethod
    def of(cls, points: Iterable[Mapping[str, Any]]) -> Validated:
        """From the runs' descriptions: chip (chip_key), framework (or engine), attention, gpus, seq_len."""
        pts = list(points)
        g = [p["gpus"] for p in pts if p.get("gpus")]
        s = [p["seq_len"] for p in pts if p.get("seq_len")]
        return cls(frozenset(p["chip"] for p in pts), frozenset(p["framework"] for p in pts),
                   frozenset(p["attention"] for p in pts if p.get("attention")),
                   (min(g), max(g)) if g else None, (min(s), max(s)) if s else None)

    def to_json(self) -> dict[str, Any]:
        return {"chips": sorted(self.chips), "frameworks": sorted(self.frameworks), "attention": sorted(self.attention),
                "gpus": list(self.gpus) if self.gpus else None, "seq_len": list(self.seq_len) if self.seq_len else None}


def _inside(x: int, rng: tuple[int, int] | None) -> bool:
    """At most the largest public run: a run smaller than the smallest one is a simpler case of
    the same physics (fewer collectives, less attention), not an extrapolation."""
    return rng is not None and x <= rng[1]


def training_features(point: Mapping[str, Any], v: Validated) -> dict[str, bool]:
    """The regime of a training prediction: point has chip, framework, attention, gpus, seq_len, moe."""
    return {"moe": bool(point["moe"]), "chip_measured": point["chip"] in v.chips,
            "framework_validated": point["framework"] in v.frameworks,
            "attention_validated": point["attention"] in v.attention,
            "scale_validated": _inside(point["gpus"], v.gpus) and _inside(point["seq_len"], v.seq_len)}


def serving_features(point: Mapping[str, Any], v: Validated) -> dict[str, bool]:
    """The regime of a serving prediction: point has chip, framework (the engine), moe."""
    return {"moe": bool(point["moe"]), "chip_measured": point["chip"] in v.chips,
            "engine_validated": point["framework"] in v.frameworks}
