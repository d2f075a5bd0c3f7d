"""A serving-plan request as a user states it (model, request rate, SLOs, GPUs or a cluster),
resolved into a plan: the checks and defaults the CLI (`gpucluster plan serve`) and the Python
API share.

    import gpucluster
    plan = gpucluster.plan_serve("llama3-70b", rate=1000, gpu="H100:8", slo_ttft="500ms", precision="fp8")
    plan.best.replicas, plan.best.gpus, plan.best.usd_per_mtok(plan.rate, plan.output_tokens)
    plan.best.usd_per_mtok_in_out(plan.rate, plan.request["input"], plan.output_tokens)
    gpucluster.plan_serve(..., simulate=True).checks.passed    # the discrete-event check met the SLOs
    plan.document().best.operating_point.ttft_p99_s
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucluster.api_args import MAX_RATE, PLAN_SERVE, SERVE_FLAGS, checked
from gpucluster.errors import UserError

if TYPE_CHECKING:
    from gpucluster.documents.plan_serve import PlanServeDocument
    from gpucluster.plan.serve_search import Option, ServeSearch

LENGTHS = ("fixed", "uniform", "exponential")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?\s*$")
_RATE = re.compile(r"^\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)\s*([kKmM]?)\s*(?:/s|rps)?\s*$")


def parse_duration(text: str, field: str) -> float:
    """'500ms', '0.5s', '200us', '50' (milliseconds) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise UserError(f"expected a duration such as 500ms, 0.5s or 200us, got {text!r}", field=field)
    value = float(m.group(1)) * {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}[m.group(2)]
    if value <= 0:
        raise UserError(f"must be > 0, got {text!r}", field=field)
    return value


def parse_rate(text: str) -> float:
    """'1000', '50k', '2.5k/s' -> requests per second."""
    m = _RATE.match(text)
    if not m:
        raise UserError(f"expected requests per second such as 1000 or 50k, got {text!r}", field="--rate")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)]
    if not 0 < value <= MAX_RATE:
        raise UserError(f"must be > 0 and <= {MAX_RATE:g} requests per second, got {text[:60]!r}", field="--rate")
    return value


def _seconds(value: str | float | None, field: str) -> float | None:
    """A duration given as text ('500ms') or as seconds (a number, from Python)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return parse_duration(value, field)
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"must be > 0 seconds, got {value!r}", field=field)
    return float(value)


def _per_second(rate: float) -> float:
    if isinstance(rate, bool) or not 0 < rate <= MAX_RATE:
        raise UserError(f"must be > 0 and <= {MAX_RATE:g} requests per second, got {rate!r}", field="--rate")
    return float(rate)


@dataclass
class ServePlan:
    """What `plan serve` found: the ranked deployments (`search`), the request as resolved
    (`request`, the JSON document's `request`), and with simulate=True the discrete-event check
    (`checks`: the deployments simulated, cheapest first, until one meets the SLOs; `simulation`:
    the run of the recommended one). A deployment that breaks an SLO in simulation is not
    recommended; when none checked passes, `checks.passed` is False and `checks.summary()` says
    by how much the closest misses."""
    search: ServeSearch
    request: dict[str, Any]
    simulation: Any
    spec: Any
    fabrics: list[Any]
    traffic: Any
    quant: Any

    @property
    def best(self) -> Option:
        assert self.search.best is not None
        return self.search.best

    @property
    def options(self) -> list[Option]:
        return self.search.options

    @property
    def checks(self) -> Any:
        """With simulate=True, the discrete-event check of the ranked deployments
        (plan/serve_check.py SimChecks: .passed, .summary(), .checks); else None."""
        return self.search.checks

    @property
    def rate(self) -> float:
        return self.request["rate"]

    @property
    def output_tokens(self) -> int:
        return self.request["output"]

    def document(self) -> PlanServeDocument:
        """The gpucluster-plan-serve/v1 document (what `--json` prints)."""
        from gpucluster.documents.plan_serve import build
        return build(self.search, self.request, self.simulation, spec=self.spec)


def _check_counts(input_tokens: int, output_tokens: int, max_batch: int, nodes: int | None) -> None:
    for name, v in (("--input", input_tokens), ("--output", output_tokens), ("--max-batch", max_batch)):
        if v < 1:
            raise UserError(f"must be >= 1, got {v}", field=name)
    if nodes is not None and nodes < 1:
        raise UserError(f"must be >= 1, got {nodes}", field="--nodes")


def _kv_precision(precision: str, kv_precision: str | None) -> str:
    from gpucluster.model.serving.kv_cache import KV_BYTES, WEIGHT_BYTES

    if precision not in WEIGHT_BYTES:
        raise UserError(f"must be one of {', '.join(WEIGHT_BYTES)}, got {precision!r}", field="--precision")
    kv = kv_precision or (precision if precision in KV_BYTES else "bf16")
    if kv not in KV_BYTES:
        raise UserError(f"must be one of {', '.join(KV_BYTES)}, got {kv!r}", field="--kv-precision")
    return kv


def _fabrics(target: Any, compare: str | list[str] | None, nodes: int | None, nic: str) -> list[Any]:
    """The target's fabric, then one per --compare GPU type (same GPUs per node and NIC)."""
    from gpucluster.catalog import catalog, parse_accelerator
    from gpucluster.plan.fabric_from import from_flags

    fabrics = [target.fabric]
    per_node = target.fabric.gpus_per_node
    if not compare:
        return fabrics
    if isinstance(compare, str):
        names = [n for n, g in catalog.gpus.items() if g.prices.rental_usd_per_gpu_hour] \
            if compare.strip() == "all" else [c.strip() for c in compare.split(",") if c.strip()]
    else:
        names = list(compare)
    for name in names:
        g, _ = parse_accelerator(name, field="--compare")
        if g.name != target.fabric.gpu_name:
            fabrics.append(from_flags(f"{g.name}:{per_node}", nodes if nodes is not None else 1, nic, None).fabric)
    return fabrics


def _cpus(cpu: str | None) -> list[tuple[Any, int]]:
    from gpucluster.catalog import catalog

    if not cpu:
        return []
    cname, _, sockets = cpu.partition(":")
    if sockets and (not sockets.isdigit() or int(sockets) < 1):
        raise UserError(f"sockets per node must be a positive integer, got {sockets!r}", field="--cpu")
    return [(catalog.cpus.get(cname.strip(), field="--cpu"), int(sockets or 2))]


@checked(PLAN_SERVE, flags=SERVE_FLAGS)
def plan_serve(model: str | Any, rate: str | float, *, gpu: str | None = None, cluster: str | None = None,
               pool: str | None = None, nodes: int | None = None, nic: str = "NDR400", input_tokens: int = 512,
               output_tokens: int = 256, lengths: str = "fixed", slo_ttft: str | float | None = None,
               slo_tpot: str | float | None = None, precision: str = "bf16", kv_precision: str | None = None,
               max_batch: int = 512, compare: str | list[str] | None = None, cpu: str | None = None,
               simulate: bool = False, engine: str | None = None) -> ServePlan:
    """Size a serving deployment: replicas, TP x PP per replica, batch, TTFT/TPOT and cost per
    million tokens for `rate` requests per second ('50k' or a number) within the SLOs (durations
    as '500ms' or seconds). `engine` (vllm, sglang, trtllm, ...: catalog/data/engines.yaml; default
    the registry's) picks the engine's measured kernels and host costs. Bad input, or nothing that
    fits, raises `UserError` naming the field."""
    from gpucluster.catalog.serving import get_engine
    from gpucluster.model.serving.kv_cache import Quant
    from gpucluster.model.serving.queueing import Lengths, Traffic
    from gpucluster.plan.fabric_from import from_options
    from gpucluster.plan.serve_search import search
    from gpucluster.specs.workload import TransformerSpec, load_model_spec

    req_rate = parse_rate(rate) if isinstance(rate, str) else _per_second(rate)
    _check_counts(input_tokens, output_tokens, max_batch, nodes)
    if lengths not in LENGTHS:
        raise UserError(f"must be fixed, uniform or exponential, got {lengths!r}", field="--lengths")
    kv = _kv_precision(precision, kv_precision)
    # None: the default. The version stays with the name (vllm@0.6.6): it selects the registry's overrides.
    named = f"{get_engine(engine, field='--engine').name}{'@' + v if (v := engine.partition('@')[2].strip()) else ''}" \
        if engine is not None else None
    ttft, tpot = _seconds(slo_ttft, "--slo-ttft"), _seconds(slo_tpot, "--slo-tpot")
    spec = model if isinstance(model, TransformerSpec) else load_model_spec(model)

    target = from_options(cluster, pool, gpu, nodes, nic, None)
    fabrics = _fabrics(target, compare, nodes, nic)
    cpus = _cpus(cpu)
    traffic = Traffic(req_rate, Lengths(float(input_tokens), lengths), Lengths(float(output_tokens), lengths))  # type: ignore[arg-type]
    quant = Quant(precision, kv)
    max_replica = target.fabric.gpus_per_node * (nodes if nodes else 8)
    result = search(spec, fabrics, req_rate, traffic, quant=quant, slo_ttft=ttft, slo_tpot=tpot,
                    max_batch=max_batch, max_gpus_per_replica=max_replica, cpus=cpus, engine=named)
    if result.best is None:
        raise nothing_fits(spec, result, ttft, tpot, max_replica)
    sim = None
    if simulate:
        from gpucluster.plan import serve_check

        checks = serve_check.check(spec, fabrics, result, traffic, quant, req_rate, named, ttft, tpot)
        serve_check.apply(result, checks)
        # The check of the recommended deployment (the one that passed; else the cheapest, flagged).
        sim = next((c.sim for c in checks.checks if c.option is result.best), None)
    request: dict[str, Any] = {
        "model": spec.name or (model if isinstance(model, str) else "model"), "rate": req_rate, "input": input_tokens,
        "output": output_tokens, "lengths": lengths, "slo_ttft_s": ttft, "slo_tpot_s": tpot, "weights": precision,
        "kv": kv, "engine": named, "target": target.description, "gpus_per_node": target.fabric.gpus_per_node, "nodes": nodes,
        "requested_hardware": target.fabric.gpu_name,
        "compared": [f.gpu_name for f in fabrics[1:]] + [f"{sockets} x {c.name}" for c, sockets in cpus]}
    return ServePlan(result, request, sim, spec, fabrics, traffic, quant)


def nothing_fits(spec: Any, result: Any, ttft: float | None, tpot: float | None, max_replica: int) -> UserError:
    """The one-line error when no replica shape works: what binds, and by how much."""
    name = spec.name or "the model"
    slo = [r for r in result.rejected if r.reason in ("TTFT SLO", "TPOT SLO")]
    if slo:
        def limit_of(r: Any) -> float:
            return ttft if r.reason == "TTFT SLO" else tpot  # type: ignore[return-value]
        r = min(slo, key=lambda r: r.needed / limit_of(r))
        field = "--slo-ttft" if r.reason == "TTFT SLO" else "--slo-tpot"
        limit = limit_of(r)
        return UserError(f"no configuration meets {r.reason.split()[0]} p99 <= {limit * 1e3:g} ms: the fastest "
                         f"({r.hardware} TP{r.tp} x PP{r.pp}) gives {r.needed * 1e3:.1f} ms at light load, "
                         f"{r.needed / limit:.2f}x over", field=field)
    mem = [r for r in result.rejected if r.reason == "memory"]
    if mem:
        r = min(mem, key=lambda r: r.needed)
        return UserError(f"{name} fits on no replica up to {max_replica} GPUs: the smallest footprint "
                         f"({r.hardware} TP{r.tp} x PP{r.pp}) {r.detail}; try --precision fp8/int4, a GPU with "
                         f"more memory, or more --nodes", field="--model")
    prec = [r for r in result.rejected if r.reason == "precision"]
    if prec:   # K80: fp32/fp64 only
        return UserError(f"{prec[0].detail}: the serving model runs bf16/fp16 or narrower math", field="--gpu")
    return UserError(f"no replica shape is valid for {name} on these GPUs (heads and layers must divide "
                     f"over TP and PP)", field="--model")
