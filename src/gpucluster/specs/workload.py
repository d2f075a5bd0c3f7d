"""The transformer a workload trains or serves: `TransformerSpec`, presets and loading.

A spec holds the architecture only (no parallel layout). Fields left out take the
defaults of the validation format (shared/validation/README.md, `model:`):
kv_heads = heads, ffn_hidden = 4 * hidden, moe_ffn_hidden = ffn_hidden,
head_dim = hidden / heads, experts = experts_per_token = 1, no shared experts,
no leading dense layers, untied embeddings. A few further fields describe what
only the parameter count sees (biases, norms, position embeddings); by default a
non-gated MLP means a GPT-style model (biases, LayerNorm, learned positions) and
a gated one a Llama-style model (no biases, RMSNorm, rotary positions).

Defaults are filled in by field validators (`validate_default=True`) in field
order, so a loaded spec has every field set and dumps to a file that loads back
to an equal spec. Presets live in catalog/data/models.yaml, each citing its
source; `load_model_spec` takes a preset name (case-insensitive, aliases) or a
YAML file path.

No `from __future__ import annotations`: every command defines these models at start-up, and
pydantic would compile and evaluate each field's annotation from its text.
"""

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, ValidationInfo, field_validator

from gpucluster.api_args import MODEL_NAME, checked
from gpucluster.files import is_file
from gpucluster.catalog.models import Entry, Sourced, _known_source
from gpucluster.errors import UserError
from gpucluster.registry import Registry

MODELS_FILE = Path(__file__).resolve().parents[1] / "catalog" / "data" / "models.yaml"
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


_T = TypeVar("_T")


def filled(value: _T | None) -> _T:
    """A field the validators fill in (kv_heads, ffn_hidden, moe_ffn_hidden, head_dim; with MLA its
    ranks): optional in the YAML, never None on a validated spec. Raises rather than compute with None."""
    if value is None:
        raise TypeError("a derived TransformerSpec field is unset: build the spec through model_validate")
    return value


def _given(info: ValidationInfo, *names: str) -> bool:
    """True when the earlier fields `names` validated (a failed one is absent from info.data)."""
    return all(info.data.get(n) is not None for n in names)


class TransformerSpec(BaseModel):
    """A decoder-only transformer (dense or mixture-of-experts; MHA/GQA/MQA or MLA attention)."""
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first validation

    name: str | None = Field(None, description="free text, e.g. the preset name")
    layers: PositiveInt = Field(le=100_000, description="transformer layers (blocks)")
    hidden: PositiveInt = Field(le=10_000_000, description="model width h (residual stream)")
    heads: PositiveInt = Field(le=1_000_000, description="attention (query) heads a")
    kv_heads: PositiveInt | None = Field(None, le=1_000_000, validate_default=True,
                                         description="key/value heads (GQA); default heads; 1 = MQA")
    ffn_hidden: PositiveInt | None = Field(None, le=100_000_000, validate_default=True,
                                           description="MLP inner width of dense layers; default 4 * hidden")
    gated_mlp: bool = Field(False, description="SwiGLU-style 3-matrix MLP (gate, up, down)")
    vocab: PositiveInt = Field(le=1_000_000_000, description="vocabulary size V (as the logits layer sees it)")
    seq_len: PositiveInt = Field(le=1_000_000_000, description="sequence length s (tokens per sample)")
    experts: PositiveInt = Field(1, le=1_000_000, description="MoE routed experts per MoE layer; 1 = dense model")
    experts_per_token: PositiveInt = Field(1, le=1_000_000, description="MoE top-k: routed experts each token goes to")
    moe_ffn_hidden: PositiveInt | None = Field(None, le=100_000_000, validate_default=True,
                                               description="FFN width of one expert; default ffn_hidden")
    shared_experts: NonNegativeInt = Field(0, le=1_000_000, description="MoE: always-active experts of width moe_ffn_hidden")
    dense_layers: NonNegativeInt = Field(0, le=100_000, description="MoE: leading layers with a dense MLP (ffn_hidden)")
    moe_max_nodes: PositiveInt | None = Field(
        None, le=1_000_000, description="MoE node-limited routing: each token's experts lie on at most this many nodes "
                          "(DeepSeek-V3: 4); default unlimited")
    sliding_window: PositiveInt | None = Field(
        None, le=1_000_000_000, description="sliding-window attention: keys each query attends back to (Mistral 7B: "
                                            "4096); applies to every layer; default none (full causal attention)")
    tied_embeddings: bool = Field(False, description="the logits layer reuses the input embedding matrix")
    attention: Literal["mha", "mla"] = Field(
        "mha", description="mha: multi-head (GQA/MQA via kv_heads); mla: DeepSeek multi-head latent attention")
    q_lora_rank: PositiveInt | None = Field(None, le=10_000_000, description="MLA: query compression rank; none = no compression")
    kv_lora_rank: PositiveInt | None = Field(None, le=10_000_000, validate_default=True, description="MLA: key/value latent rank")
    qk_rope_head_dim: PositiveInt | None = Field(None, le=10_000_000, validate_default=True,
                                                 description="MLA: rotary part of each query/key head")
    qk_nope_head_dim: PositiveInt | None = Field(None, le=10_000_000, validate_default=True,
                                                 description="MLA: non-rotary part of each query/key head")
    v_head_dim: PositiveInt | None = Field(None, le=10_000_000, validate_default=True, description="MLA: value head width")
    head_dim: PositiveInt | None = Field(
        None, le=10_000_000, validate_default=True,
        description="query/key head width; default hidden / heads (MLA: qk_nope + qk_rope); explicit for Gemma")
    bias: bool | None = Field(None, validate_default=True,
                              description="biases in linear layers and norms; default: not gated_mlp")
    norm: Literal["layernorm", "rmsnorm"] | None = Field(
        None, validate_default=True, description="default layernorm (non-gated) or rmsnorm (gated)")
    position_embedding: Literal["learned", "rope", "alibi", "none"] | None = Field(
        None, validate_default=True, description="learned adds seq_len x hidden parameters; default "
                                                 "learned (non-gated) or rope (gated)")
    dropout: bool | None = Field(
        None, validate_default=True,
        description="dropout layers whose masks the backward keeps; default: not gated_mlp (GPT-2/3-style "
                    "models train with dropout 0.1; Llama-style gated models with none, and PyTorch's dropout "
                    "at p = 0 returns its input without a mask)")
    activation: Literal["gelu", "relu", "squared_relu", "swiglu", "geglu"] | None = Field(
        None, validate_default=True, description="MLP activation (documentation; FLOPs and memory depend on "
                                                 "gated_mlp only); default gelu or swiglu")

    @field_validator("kv_heads")
    @classmethod
    def _kv_heads(cls, v: int | None, info: ValidationInfo) -> int | None:
        if not _given(info, "heads"):
            return v
        heads = info.data["heads"]
        if v is None:
            return heads
        if heads % v:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({v})")
        return v

    @field_validator("ffn_hidden")
    @classmethod
    def _ffn(cls, v: int | None, info: ValidationInfo) -> int | None:
        return 4 * info.data["hidden"] if v is None and _given(info, "hidden") else v

    @field_validator("experts_per_token")
    @classmethod
    def _top_k(cls, v: int, info: ValidationInfo) -> int:
        if _given(info, "experts") and v > info.data["experts"]:
            raise ValueError(f"experts_per_token ({v}) cannot exceed experts ({info.data['experts']})")
        return v

    @field_validator("moe_ffn_hidden")
    @classmethod
    def _moe_ffn(cls, v: int | None, info: ValidationInfo) -> int | None:
        return info.data.get("ffn_hidden") if v is None else v

    @field_validator("dense_layers")
    @classmethod
    def _dense_layers(cls, v: int, info: ValidationInfo) -> int:
        if _given(info, "layers") and v > info.data["layers"]:
            raise ValueError(f"dense_layers ({v}) cannot exceed layers ({info.data['layers']})")
        return v

    @field_validator("q_lora_rank")
    @classmethod
    def _q_lora(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None and info.data.get("attention") != "mla":
            raise ValueError("only applies to attention: mla")
        return v

    @field_validator("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    @classmethod
    def _mla_field(cls, v: int | None, info: ValidationInfo) -> int | None:
        mla = info.data.get("attention") == "mla"
        if mla and v is None:
            raise ValueError(f"required when attention is mla (MLA needs {', '.join(MLA_FIELDS[1:])})")
        if not mla and v is not None:
            raise ValueError("only applies to attention: mla")
        if mla and info.field_name == "v_head_dim" and info.data.get("kv_heads") not in (None, info.data.get("heads")):
            raise ValueError("MLA has one key/value head per query head: leave kv_heads out or equal to heads")
        return v

    @field_validator("head_dim")
    @classmethod
    def _head_dim(cls, v: int | None, info: ValidationInfo) -> int | None:
        d = info.data
        if d.get("attention") == "mla":
            qk = (d.get("qk_nope_head_dim") or 0) + (d.get("qk_rope_head_dim") or 0)
            if v is not None and v != qk:
                raise ValueError(f"with attention: mla, head_dim is qk_nope_head_dim + qk_rope_head_dim ({qk})")
            return qk or v
        if v is not None or not _given(info, "hidden", "heads"):
            return v
        if d["hidden"] % d["heads"]:
            raise ValueError(f"hidden ({d['hidden']}) is not a multiple of heads ({d['heads']}): give head_dim")
        return d["hidden"] // d["heads"]

    @field_validator("bias")
    @classmethod
    def _bias(cls, v: bool | None, info: ValidationInfo) -> bool | None:
        return (not info.data.get("gated_mlp", False)) if v is None else v

    @field_validator("dropout")
    @classmethod
    def _dropout(cls, v: bool | None, info: ValidationInfo) -> bool | None:
        return (not info.data.get("gated_mlp", False)) if v is None else v

    @field_validator("norm")
    @classmethod
    def _norm(cls, v: str | None, info: ValidationInfo) -> str | None:
        return ("rmsnorm" if info.data.get("gated_mlp") else "layernorm") if v is None else v

    @field_validator("position_embedding")
    @classmethod
    def _pos(cls, v: str | None, info: ValidationInfo) -> str | None:
        return ("rope" if info.data.get("gated_mlp") else "learned") if v is None else v

    @field_validator("activation")
    @classmethod
    def _activation(cls, v: str | None, info: ValidationInfo) -> str | None:
        gated = bool(info.data.get("gated_mlp"))
        if v is None:
            return "swiglu" if gated else "gelu"
        if (v in ("swiglu", "geglu")) != gated:
            raise ValueError(f"activation {v} needs gated_mlp: {str(not gated).lower()}")
        return v

    # --- derived shapes -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed (0 for a dense model)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head (MLA: nope + rope parts)."""
        return int(self.head_dim)  # type: ignore[arg-type]

    @property
    def v_dim(self) -> int:
        """Width of one value head."""
        return int(self.v_head_dim if self.attention == "mla" else self.head_dim)  # type: ignore[arg-type]

    def with_(self, **changes: Any) -> "TransformerSpec":
        """A validated copy with some fields changed (e.g. `spec.with_(seq_len=8192)`). Defaults
        derived from other fields (kv_heads, ffn_hidden, head_dim ...) keep their current values."""
        return TransformerSpec.model_validate({**self.model_dump(), **changes})


# --- presets -----------------------------------------------------------------------------

class ModelPreset(Entry):
    """One entry of catalog/data/models.yaml: an architecture, the source it comes from, and
    the parameter counts its publisher states (for comparison with ours)."""
    source: str = Field(description="id of the source in this file's `sources` (paper or config.json)")
    model: TransformerSpec
    published_total_params: Sourced | None = None
    published_active_params: Sourced | None = None
    published_batch_tokens: Sourced | None = Field(None, description="tokens per optimizer step the publisher trained with")
    notes: str | None = None

    _check_source = field_validator("source")(_known_source)


@lru_cache(maxsize=1)
def model_presets() -> Registry[ModelPreset]:
    """The presets of catalog/data/models.yaml, by name and alias (loaded once, and kept
    validated between runs: catalog/cache.py)."""
    from gpucluster.catalog.cache import cached

    return cached("models", [MODELS_FILE], _read_presets)


def _read_presets() -> Registry[ModelPreset]:
    from gpucluster.specs.loader import load_yaml, parse_data  # not at import: presets come from the cache

    data, lines = load_yaml(MODELS_FILE)
    if not isinstance(data, dict) or "entries" not in data:
        raise UserError("expected a mapping with `sources:` and `entries:`", file=str(MODELS_FILE))
    sources = data.get("sources") or {}
    reg: Registry[ModelPreset] = Registry("model preset")
    for i, raw in enumerate(data["entries"]):
        if not isinstance(raw, dict):
            raise UserError("each entry must be a mapping", file=str(MODELS_FILE), field=f"entries[{i}]")
        model = raw.get("model")
        if isinstance(model, dict) and "name" not in model:
            raw = {**raw, "model": {"name": raw.get("name"), **model}}
        entry = parse_data(ModelPreset, {**raw, "sources": sources}, str(MODELS_FILE), lines,
                           prefix=("entries", i), context={"sources": sources})
        reg.add(entry.name, entry, entry.aliases)
    return reg


def _looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml", ".json")) or os.sep in text or "/" in text


def _is_file(text: str) -> bool:
    """Path.is_file, False for a name the OS cannot even look up (too long, a NUL byte): such a name
    is then an unknown preset, one line (fuzz case 12566: OSError File name too long)."""
    try:
        return is_file(text)
    except (OSError, ValueError):
        return False


@checked(MODEL_NAME)
def load_model_spec(name_or_path: str | Path) -> TransformerSpec:
    """A preset (case-insensitive name or alias) or a YAML file.

    The file holds the spec's fields at top level, or under a `model:` key (as in a
    validation case). Errors are `UserError`s: `file:line: field: reason`, or an
    unknown preset name with the valid names listed.
    """
    text = str(name_or_path)
    presets = model_presets()
    if not isinstance(name_or_path, Path) and text in presets:
        return presets.get(text).model
    if isinstance(name_or_path, Path) or _looks_like_path(text) or _is_file(text):
        from gpucluster.specs.loader import load_yaml, parse_data

        data, lines = load_yaml(text)
        prefix: tuple[str, ...] = ()
        if isinstance(data, dict) and isinstance(data.get("model"), dict) and "layers" not in data:
            data, prefix = data["model"], ("model",)
        return parse_data(TransformerSpec, data, text, lines, prefix=prefix)
    return presets.get(text).model  # raises: unknown model preset, with the valid names
