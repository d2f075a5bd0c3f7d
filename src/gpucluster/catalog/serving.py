"""Serving data: the engine registry (data/engines.yaml) and the measured serving-kernel fits
(data/serving_kernels.yaml, distilled from aiconfigurator-core by benchmarks/distil_aiconfigurator.py).

Both are small and read once, on first use (plan serve's start-up budget)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpucluster.errors import UserError

DATA_DIR = Path(__file__).parent / "data"
EXPERT_PRECISIONS = ("as_weights", "bf16")
FIRST_TOKEN = ("prefill", "decode_step")
KV_ADMISSION = ("reserve", "on_demand")
# What a version override (engines.yaml `versions:`) may change: the engine's defaults.
_OVERRIDES = {"host_step_us", "launch_us", "cuda_graphs", "custom_allreduce", "chunked_prefill",
              "overlap_scheduling", "first_token", "before", "note"}


@dataclass(frozen=True)
class Engine:
    name: str
    title: str
    kernel_data: str | None         # whose measured kernel tables stand for its kernels
    attention_kernel: str
    cuda_graphs: bool
    custom_allreduce: bool
    chunked_prefill: bool
    overlap_scheduling: bool
    expert_precision: str           # as_weights | bf16
    host_step_s: float
    launch_s: float
    source: str
    version: str | None = None      # the version asked for, when one was (name@version)
    # Where the first output token comes from: the prefill's last position (vLLM, TensorRT-LLM,
    # SGLang), or the first decode step after a context phase that only fills the KV cache
    # (TurboMind before 0.2, after FasterTransformer): a time to first token of prefill + one step.
    first_token: str = "prefill"
    # How a request gets KV-cache memory (engines.yaml `kv_admission`): reserve (its whole context
    # before it is scheduled) or on_demand (block by block, preempting when the cache is full).
    kv_admission: str = "reserve"

    @property
    def first_token_step(self) -> bool:
        """True where the first output token costs the prefill and one decode step."""
        return self.first_token == "decode_step"


@dataclass(frozen=True)
class KernelFit:
    """t = t0 + hypot(flops / (tflops 1e12), bytes / (gbps 1e9)) (GEMM, decode attention), or
    t = t0 + bytes / (gbps 1e9) (all-reduce), with its source table."""
    t0_s: float
    gbps: float
    tflops: float
    source: str


def _load(name: str) -> Any:
    """A data file's content, through the catalog's cache (catalog/cache.py: pickled beside the
    data and rebuilt when the file changes), so that `plan serve` does not parse
    YAML at every start."""
    from gpucluster.catalog.cache import cached

    path = DATA_DIR / name

    def build() -> Any:
        from gpucluster.specs.loader import load_yaml

        data, _ = load_yaml(path)
        return data

    return cached(f"serving-{path.stem}", [path], build)


def _version(text: str) -> tuple[int, ...]:
    """'0.6.6' -> (0, 6, 6); letters and suffixes after the numbers are ignored ('0.7a' -> (0, 7))."""
    out = []
    for part in text.strip().lstrip("v").split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)


@cache
def _versions() -> dict[str, list[dict[str, Any]]]:
    return {name: list(e.get("versions") or []) for name, e in _load("engines.yaml")["engines"].items()}


@cache
def _engines() -> tuple[str, dict[str, Engine]]:
    data = _load("engines.yaml")
    out = {}
    for name, e in data["engines"].items():
        if e["expert_precision"] not in EXPERT_PRECISIONS:
            raise UserError(f"expert_precision must be one of {', '.join(EXPERT_PRECISIONS)}",
                            file="engines.yaml", field=f"engines.{name}.expert_precision")
        for i, o in enumerate(e.get("versions") or []):
            bad = sorted(set(o) - _OVERRIDES)
            if bad or "before" not in o or o.get("first_token", "prefill") not in FIRST_TOKEN:
                raise UserError(f"a version override holds before: VERSION and any of {', '.join(sorted(_OVERRIDES))}"
                                f" (first_token: {' | '.join(FIRST_TOKEN)})" + (f"; got {', '.join(bad)}" if bad else ""),
                                file="engines.yaml", field=f"engines.{name}.versions[{i}]")
        for key, valid, default in (("first_token", FIRST_TOKEN, "prefill"), ("kv_admission", KV_ADMISSION, "reserve")):
            if e.get(key, default) not in valid:
                raise UserError(f"{key} must be one of {', '.join(valid)}", file="engines.yaml",
                                field=f"engines.{name}.{key}")
        out[name] = Engine(name, e["title"], e.get("kernel_data"), e["attention_kernel"], bool(e["cuda_graphs"]),
                           bool(e["custom_allreduce"]), bool(e["chunked_prefill"]), bool(e["overlap_scheduling"]),
                           e["expert_precision"], float(e["host_step_us"]) * 1e-6, float(e["launch_us"]) * 1e-6,
                           e["source"], first_token=e.get("first_token", "prefill"),
                           kv_admission=e.get("kv_admission", "reserve"))
    return data["default"], out


def default_engine() -> str:
    """The engine a case or a plan that names none runs on (docs/serving.md)."""
    return _engines()[0]


def engine_names() -> list[str]:
    """The registry's engine names (a version may follow one: vllm@0.6.6)."""
    return list(_engines()[1])


@cache
def get_engine(name: str | None, field: str = "engine") -> Engine:
    """The registry's engine, `name` or `name@version` (the version's overrides applied); an
    unknown name is one line listing the valid ones."""
    from dataclasses import replace

    default, table = _engines()
    key, _, version = (name or default).strip().lower().partition("@")
    if key not in table:
        raise UserError(f"unknown engine {name!r}; valid: {', '.join(table)}", field=field)
    eng = table[key]
    if not version:
        return eng
    v = _version(version)
    if not v:
        raise UserError(f"engine version must start with a number (e.g. {key}@0.6.6), got {version!r}", field=field)
    # Overrides are listed oldest boundary first; every one whose boundary lies above the version
    # applies, the oldest last (so `before: 0.2` wins over `before: 0.8` for 0.1.0).
    for o in sorted(_versions()[key], key=lambda o: _version(str(o["before"])), reverse=True):
        if v < _version(str(o["before"])):
            eng = replace(eng, host_step_s=float(o.get("host_step_us", eng.host_step_s * 1e6)) * 1e-6,
                          launch_s=float(o.get("launch_us", eng.launch_s * 1e6)) * 1e-6,
                          cuda_graphs=bool(o.get("cuda_graphs", eng.cuda_graphs)),
                          custom_allreduce=bool(o.get("custom_allreduce", eng.custom_allreduce)),
                          chunked_prefill=bool(o.get("chunked_prefill", eng.chunked_prefill)),
                          overlap_scheduling=bool(o.get("overlap_scheduling", eng.overlap_scheduling)),
                          first_token=str(o.get("first_token", eng.first_token)),
                          source=f"{eng.source}; before {o['before']}: {o.get('note', '')}")
    return replace(eng, version=version)


@cache
def _kernels() -> dict[str, Any]:
    return _load("serving_kernels.yaml")["gpus"]


@cache
def kernel_fit(gpu_name: str, source: str | None, kind: str) -> KernelFit | None:
    """The measured fit of `kind` (gemm_fp8, gemm_bf16, decode_attention_fp8, allreduce_8, ...)
    for a chip and an engine's kernel tables (or 'nccl'); None where the chip or table has none."""
    if source is None:
        return None
    entry = _kernels().get(gpu_name, {}).get(source, {}).get(kind)
    if entry is None:
        return None
    t0 = entry.get("t0_us", entry.get("alpha_us", 0.0)) * 1e-6
    return KernelFit(t0, float(entry["gbps"]), float(entry.get("tflops", 0.0)), entry["source"])
