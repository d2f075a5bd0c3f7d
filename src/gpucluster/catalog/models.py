"""Pydantic models of catalog entries.

Units are in the field names (`_tflops` = 1e12 FLOP/s dense, `_gbps` = GB/s =
1e9 bytes/s, `_gbit` = Gbit/s line rate, `_tbps` = TB/s = 1e12 bytes/s, `_gib`
= 2**30 bytes, `_w` = watts, `_usd` = US dollars, `_us` = microseconds).
Every number is a `Sourced` value that names its source; a source says whether
the number is from a datasheet, a measurement, a fit or a price list.

No `from __future__ import annotations`: every command defines these classes at start-up, and
pydantic would compile and evaluate each field's annotation from its text (classes here only
refer to classes above them).
"""

from datetime import date
from typing import Literal

from pydantic import (BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator,
                      model_validator)

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"]
Provenance = Literal["datasheet", "measured", "fitted", "price-list", "market", "estimate", "input"]


class Strict(BaseModel):
    # Validators are built on first validation, not at import: a command that reads the catalog
    # from its cache (catalog/cache.py) never builds them.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Source(Strict):
    title: str
    kind: Provenance
    date: date
    url: str | None = None
    notes: str | None = None
    # A `fitted` figure: the validation files (by name) whose runs it was fitted on, so `validate`
    # labels a prediction of those runs in-sample.
    fitted_on: tuple[str, ...] = ()


def _known_source(ref: str, info: ValidationInfo) -> str:
    """With the file's `sources` passed as validation context, a bad id is reported at its field."""
    sources = (info.context or {}).get("sources")
    if isinstance(sources, dict) and ref not in sources:
        raise ValueError(f"source {ref!r} is not defined in `sources` (defined: {', '.join(sources)})")
    return ref


class Sourced(Strict):
    """A non-negative number with the id of its source (a key of the file's `sources`)."""
    value: float = Field(ge=0)
    source: str

    _check_source = field_validator("source")(_known_source)


class GemmPoint(Strict):
    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    precision: Precision
    tflops: PositiveFloat
    source: str

    _check_source = field_validator("source")(_known_source)


AttentionDirection = Literal["forward", "backward", "fwd_bwd", "unstated"]


class AttentionPoint(Strict):
    """Achieved TFLOP/s of one attention kernel (model/training/attention.py names them) at one shape, as
    printed: FlashAttention's FLOP convention (4 b s^2 h d forward, halved when causal; backward 2.5x)."""
    kernel: str
    precision: Precision
    direction: AttentionDirection = Field(description="forward, backward, fwd_bwd (one combined figure) or "
                                                      "unstated (the source does not say)")
    head_dim: PositiveInt | None = None
    seq_len: PositiveInt | None = None
    batch: PositiveInt | None = None
    heads: PositiveInt | None = None
    causal: bool | None = None
    tflops: PositiveFloat
    source: str

    _check_source = field_validator("source")(_known_source)


class Efficiency(Strict):
    gemm: list[GemmPoint] = Field(default_factory=list, description="achieved GEMM TFLOP/s by shape")
    attention: list[AttentionPoint] = Field(
        default_factory=list, description="achieved attention-kernel TFLOP/s by kernel, shape and pass")
    hbm_fraction: Sourced | None = Field(None, description="achievable fraction of peak HBM bandwidth (STREAM-like)")
    attention_tflops: Sourced | None = Field(
        None, description="fused (flash) attention forward TFLOP/s in bf16/fp16, as measured")
    best_published_mfu: dict[Precision, Sourced] = Field(
        default_factory=dict, description="highest model FLOPs utilization of a published training run, per precision")
    sustained_fraction: dict[Precision, Sourced] = Field(
        default_factory=dict,
        description="compute throughput sustained in end-to-end training relative to the GEMM and attention "
                    "microbenchmarks (power-capped clocks, kernel mix), per precision; fitted on published runs")
    serving_fraction: dict[Precision, Sourced] = Field(
        default_factory=dict,
        description="device time of a serving engine's step relative to the kernel-level model (gaps between "
                    "kernels, skinny serving GEMMs), per math precision; fitted on published serving runs")


class Memory(Strict):
    capacity_gib: Sourced
    bandwidth_tbps: Sourced
    type: str


class ScaleUp(Strict):
    """The GPU's scale-up link: NVLink/NVSwitch, Infinity Fabric or PCIe."""
    link: str = Field(description="name of a link technology in links.yaml")
    bandwidth_gbps_per_direction: Sourced = Field(description="GB/s per direction, one GPU to the domain")
    domain_size: Sourced = Field(description="GPUs in one scale-up domain")
    switched: bool = Field(description="true: NVSwitch (any-to-any at full rate); false: point-to-point mesh")
    in_switch_reduction: bool = Field(False, description="NVLink SHARP (NVLS) all-reduce in the switch")


class Prices(Strict):
    purchase_usd: Sourced | None = None
    rental_usd_per_gpu_hour: Sourced | None = None


class Entry(Strict):
    """A named catalog entry whose every `Sourced` number names a defined source."""
    name: str
    aliases: list[str] = Field(default_factory=list)
    sources: dict[str, Source]

    @model_validator(mode="after")
    def _sources_resolve(self):
        for ref in _source_refs(self):
            if ref not in self.sources:
                raise ValueError(f"source {ref!r} is not defined in `sources` (defined: {', '.join(self.sources)})")
        return self


class Gpu(Entry):
    vendor: Literal["nvidia", "amd", "intel", "google", "aws"]
    architecture: str
    form_factor: str
    peak_tflops: dict[Precision, Sourced] = Field(description="dense peak TFLOP/s, no sparsity")
    memory: Memory
    scale_up: ScaleUp
    host_link: str = Field(description="PCIe generation to the host, e.g. PCIe5 x16")
    tdp_w: Sourced
    power_cap_w: Sourced | None = Field(
        None, description="board power limit below tdp_w (nvidia-smi -pl); lowers sustained clocks "
                          "(model/training/power.py). Set through a cluster pool's or a case's power_cap_w")
    sm_count: Sourced | None = Field(None, description="streaming multiprocessors (AMD: compute units): GEMM wave quantization")
    prices: Prices = Field(default_factory=Prices)
    efficiency: Efficiency = Field(default_factory=Efficiency)

    @property
    def domain_size(self) -> int:
        return int(self.scale_up.domain_size.value)

    @property
    def hbm_bytes(self) -> float:
        return self.memory.capacity_gib.value * 2**30


def _source_refs(model: BaseModel):
    for value in model.__dict__.values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, Sourced | GemmPoint | AttentionPoint):
                yield item.source
            elif isinstance(item, BaseModel):
                yield from _source_refs(item)


class Ramp(Strict):
    """How one collective algorithm approaches its asymptote on one link technology.

    busbw(S) = B_inf / (1 + (half_bytes / w)^k) for w bus bytes, plus a fixed latency:
    NCCL needs large messages to fill all its channels and pipeline slots.
    """
    efficiency: Sourced = Field(description="asymptotic fraction of the link's GB/s per direction")
    half_bytes: Sourced = Field(description="bus bytes at which the bandwidth term runs at half speed")
    ramp_exponent: Sourced = Field(description="k above; 1 is pure alpha-beta")


class LowLatency(Strict):
    """NCCL's LL protocol on one link technology: each 8-byte store carries a flag with its data,
    so a step costs little latency but the link runs at a fraction of its rate. NCCL's tuner
    picks it for small messages, the bulk protocols (LL128/Simple, `Link.ring`) for large ones."""
    hop_latency_us: Sourced = Field(description="latency of one algorithm step under LL")
    efficiency: Sourced = Field(description="fraction of the link's GB/s per direction LL reaches")


class Link(Entry):
    """A link technology and how well collectives use it (fitted per technology, never per row)."""
    kind: Literal["scale-up", "scale-out"]
    base_latency_us: Sourced = Field(description="fixed launch and synchronisation cost of a collective")
    hop_latency_us: Sourced = Field(description="latency added by each algorithm step over this link "
                                    "under the bulk protocols (LL128/Simple)")
    ring: Ramp
    in_switch: Ramp | None = Field(None, description="NVLink SHARP (NVLS) all-reduce, where the switch reduces")
    low_latency: LowLatency | None = Field(None, description="NCCL's LL protocol; None: bulk protocols only")


class Nic(Entry):
    fabric: Literal["infiniband", "roce", "ethernet"]
    line_rate_gbit: Sourced = Field(description="Gbit/s per port")
    link: str = Field(description="name of a scale-out link technology in links.yaml")
    power_w: Sourced | None = None
    price_usd: Sourced | None = None


class Switch(Entry):
    fabric: Literal["infiniband", "roce", "ethernet"]
    radix: Sourced = Field(description="ports at port_gbit")
    port_gbit: Sourced
    power_w: Sourced
    price_usd: Sourced | None = None


class Cpu(Entry):
    vendor: Literal["amd", "intel", "nvidia", "ampere", "aws"]
    cores: Sourced
    base_ghz: Sourced
    boost_ghz: Sourced
    peak_fp32_tflops: Sourced = Field(description="cores x boost GHz x FLOP/cycle (AVX-512/AVX2 FMA)")
    memory_bandwidth_gbps: Sourced
    tdp_w: Sourced
    price_usd: Sourced | None = None
