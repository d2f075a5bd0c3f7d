"""Serving search: which replica (GPU type, TP x PP, batch) serves a request rate within
SLOs at the lowest cost, how many replicas it takes, and what binds.

For each GPU type and each replica shape (tp inside the NVLink domain, dividing the
heads as Megatron and vLLM require; pp over layers, across nodes), the search checks that
the weights and one sequence's KV cache fit (kv_cache.replica_memory), caps the batch at
the sequences that fit and at `max_batch`, finds the highest rate one replica sustains
within the SLOs (queueing.max_rate; HEADROOM = 90% of its capacity where no SLO stops it
first), and takes ceil(rate / that) replicas. Cost per
million output tokens = GPUs x rental $/GPU-hour (catalog, with its source) / output
tokens per hour at the target rate; "own" divides the processors' purchase price
(catalog) over 3 years instead (processors only: no server, power or staff), the one
basis on which CPU nodes (no rental price in the catalog) compare. Ranked by rented
cost (CPU options last), then by TTFT p99.

What binds (the recommended deployment's `binding`):
- "SLO (TTFT p99)" / "SLO (TPOT p99)": the replica could take more load but the SLO stops it;
- "memory": the KV cache caps the batch below max_batch;
- otherwise the resource that dominates the replica's busiest step at capacity:
  "compute", "HBM bandwidth", "interconnect", or "kernel and host overhead".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpucluster.catalog.models import Cpu
from gpucluster.model.cost import usd_per_million_tokens
from gpucluster.model.serving.cpu import CpuStepModel
from gpucluster.model.serving.kv_cache import Quant, replica_memory
from gpucluster.model.serving.queueing import ServingPoint, StepModel, Traffic, analyze, max_rate
from gpucluster.model.serving.step_time import Replica, decode_step_time, efficiency, prefill_time
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.transformer_params import layout_problems
from gpucluster.specs.workload import TransformerSpec

PP_CHOICES = (1, 2, 4, 8)
DEFAULT_MAX_BATCH = 512      # vLLM V1's max_num_seqs on data-center GPUs is 256-1024
HOURS_PER_YEAR = 8766
# Where no SLO stops a replica first, it is loaded to 90% of its capacity: queues (and so
# TTFT) grow without bound as the load approaches 100%.
HEADROOM = 0.9


@dataclass
class Option:
    hardware: str                      # GPU or CPU name
    tp: int
    pp: int
    gpus_per_replica: int              # processors (GPUs, or CPU sockets) per replica
    max_batch: int                     # concurrent sequences allowed (memory and cap)
    memory_batch: int                  # sequences whose KV cache fits
    per_replica_rate: float            # highest rate within SLOs, requests/s
    replicas: int
    point: ServingPoint                # one replica at rate / replicas
    limit: str                         # "capacity", "TTFT SLO", "TPOT SLO"
    binding: str
    usd_per_hour: float | None         # all replicas, rented (GPUs: catalog $/GPU-hour)
    price_source: str | None
    own_usd_per_hour: float | None = None   # all replicas, owned: processors' price over 3 years
    weights_gib: float = 0.0
    efficiency: tuple[float, str] = (1.0, "")

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    def usd_per_mtok(self, rate: float, output_tokens: float, own: bool = False) -> float | None:
        usd = self.own_usd_per_hour if own else self.usd_per_hour
        if usd is None:
            return None
        return usd_per_million_tokens(usd / self.gpus, self.gpus, rate * output_tokens)

    def usd_per_mtok_in_out(self, rate: float, input_tokens: float, output_tokens: float,
                            own: bool = False) -> float | None:
        """$ per million tokens in and out: $/hour / (rate x (input + output) tokens x 3600) x 1e6,
        the basis of APIs that bill prompt and output tokens alike (a prompt token costs far less
        compute than an output token: this figure is lower than usd_per_mtok, not a discount)."""
        usd = self.own_usd_per_hour if own else self.usd_per_hour
        if usd is None:
            return None
        return usd_per_million_tokens(usd / self.gpus, self.gpus, rate * (input_tokens + output_tokens))


@dataclass
class Rejected:
    hardware: str
    tp: int
    pp: int
    reason: str                        # "memory", "TTFT SLO", "TPOT SLO", "layout"
    detail: str
    needed: float = 0.0                # memory: bytes per GPU needed; SLO: best p99 (s)


@dataclass
class ServeSearch:
    options: list[Option]
    rejected: list[Rejected] = field(default_factory=list)
    checks: Any = None                 # plan/serve_check.py SimChecks, with --simulate

    @property
    def best(self) -> Option | None:
        return self.options[0] if self.options else None

    def best_per_hardware(self, names: Iterable[str]) -> list[tuple[str, Option | None, str]]:
        """The cheapest deployment of each hardware type searched (GPU or CPU node, in the order
        given), or None and why none is left (the rejected shapes' reasons, counted)."""
        out: list[tuple[str, Option | None, str]] = []
        for name in names:
            o = next((o for o in self.options if o.hardware == name), None)
            if o is not None:
                out.append((name, o, ""))
                continue
            counts: dict[str, int] = {}
            for r in self.rejected:
                if r.hardware == name:
                    counts[r.reason] = counts.get(r.reason, 0) + 1
            why = "; ".join(f"{reason} ({n} shape{'s' if n > 1 else ''})" for reason, n in counts.items())
            out.append((name, None, f"no deployment: {why}" if why else "no deployment"))
        return out


def _tp_choices(spec: TransformerSpec, domain: int) -> list[int]:
    out, tp = [], 1
    while tp <= domain:
        if not layout_problems(spec, tp=tp):
            out.append(tp)
        tp *= 2
    return out


def _binding(rep: Replica, opt_limit: str, max_batch: int, memory_batch: int, cap: int,
             traffic: Traffic) -> str:
    if opt_limit == "TTFT SLO":
        return "SLO (TTFT p99)"
    if opt_limit == "TPOT SLO":
        return "SLO (TPOT p99)"
    if memory_batch < cap and max_batch == memory_batch:
        return f"memory (KV cache holds {memory_batch} sequences)"
    ctx = traffic.input.mean + traffic.output.mean / 2
    if traffic.output.mean <= 1:
        return prefill_time(rep, max_batch, int(traffic.input.mean)).bound
    return decode_step_time(rep, max_batch, ctx).bound


def _evaluate(step, hardware: str, tp: int, pp: int, per_replica: int, memory_batch: int, cap: int,
              rate: float, traffic: Traffic, slo_ttft: float | None, slo_tpot: float | None,
              price: float | None, own: float | None, price_source: str | None) -> Option | Rejected:
    max_batch = min(memory_batch, cap)
    r, point, limit = max_rate(step, traffic, max_batch, slo_ttft, slo_tpot, best_latency=False)
    if r <= 0 or point is None:
        # No operating point at all: nothing was measured (a missing point used to raise here).
        if point is None:
            best = math.inf
        else:
            best = point.ttft_p99 if limit == "TTFT SLO" else (point.tpot_p99 or math.inf)
        return Rejected(hardware, tp, pp, limit, f"p99 {limit.split()[0]} {best * 1e3:.1f} ms at light load",
                        best)
    if limit == "capacity":
        r *= HEADROOM
    replicas = max(1, math.ceil(rate / r * (1 - 1e-9)))
    at = analyze(step, Traffic(rate / replicas, traffic.input, traffic.output), max_batch)
    usd = price * per_replica * replicas if price is not None else None
    own_usd = own * per_replica * replicas if own is not None else None
    return Option(hardware, tp, pp, per_replica, max_batch, memory_batch, r, replicas, at, limit, "",
                  usd, price_source, own_usd)


def search(spec: TransformerSpec, fabrics: Iterable[TrainingFabric], rate: float, traffic: Traffic, *,
           quant: Quant | None = None, slo_ttft: float | None = None, slo_tpot: float | None = None,
           max_batch: int = DEFAULT_MAX_BATCH, max_gpus_per_replica: int = 64,
           cpus: Iterable[tuple[Cpu, int]] = (), engine: str | None = None) -> ServeSearch:
    """Every replica shape on every fabric (and CPU nodes of (cpu, sockets)), ranked by cost; GPU
    replicas run on `engine` (catalog/data/engines.yaml; None: the registry's default)."""
    quant = quant or Quant()
    options: list[Option] = []
    rejected: list[Rejected] = []
    context = int(traffic.input.quantile(0.99) + traffic.output.quantile(0.99))
    for fab in fabrics:
        gpu = fab.gpu
        if not {"bf16", "fp16"} & set(gpu.peak_tflops):   # K80: the step model runs 16-bit or narrower math
            rejected.append(Rejected(gpu.name, 1, 1, "precision", f"{gpu.name} has no bf16 or fp16 "
                                     f"(it has: {', '.join(gpu.peak_tflops)})"))
            continue
        rent, buy = gpu.prices.rental_usd_per_gpu_hour, gpu.prices.purchase_usd
        price = rent.value if rent else None
        own = buy.value / (3 * HOURS_PER_YEAR) if buy else None
        source = f"{gpu.name}: ${rent.value:g}/GPU-hour ({gpu.sources[rent.source].title})" if rent else None
        for pp in PP_CHOICES:
            if pp > spec.layers:
                continue
            for tp in _tp_choices(spec, fab.domain):
                if tp * pp > max_gpus_per_replica or (pp > 1 and tp * pp > fab.gpus_per_node
                                                      and fab.scale_out_link is None):
                    continue
                mem = replica_memory(spec, gpu, quant, tp, pp, context)
                if not mem.fits:
                    rejected.append(Rejected(gpu.name, tp, pp, "memory",
                                             f"needs {mem.needed_for(1) / 2**30:.1f} GiB per GPU of "
                                             f"{mem.usable / 2**30:.1f} usable", mem.needed_for(1)))
                    continue
                rep = Replica(spec, fab, tp, pp, quant, engine)
                res = _evaluate(StepModel(rep), gpu.name, tp, pp, tp * pp, mem.max_sequences, max_batch, rate,
                                traffic, slo_ttft, slo_tpot, price, own, source)
                if isinstance(res, Option):
                    res.binding = _binding(rep, res.limit, res.max_batch, mem.max_sequences, max_batch, traffic)
                    res.weights_gib = mem.weights / 2**30
                    res.efficiency = efficiency(rep)
                    options.append(res)
                else:
                    rejected.append(res)
    for cpu, sockets in cpus:
        step = CpuStepModel(spec, cpu, sockets)
        own = cpu.price_usd.value / (3 * HOURS_PER_YEAR) if cpu.price_usd else None
        src = (f"{cpu.name}: ${cpu.price_usd.value:,.0f} per socket over 3 years "
               f"({cpu.sources[cpu.price_usd.source].title})") if cpu.price_usd else None
        res = _evaluate(step, f"{sockets} x {cpu.name}", 1, 1, sockets, max_batch, max_batch, rate, traffic,
                        slo_ttft, slo_tpot, None, own, src)
        if isinstance(res, Option):
            res.binding = "compute" if res.limit == "capacity" else f"SLO ({res.limit.split()[0]} p99)"
            res.efficiency = (1.0, "CPU model: estimates, see model/serving/cpu.py")
            options.append(res)
        else:
            rejected.append(res)
    # Cheapest first; a hardware type with no price in the catalog ranks by what it costs in kind,
    # the GPUs (or sockets) it takes, so that a missing price never recommends the largest replica.
    options.sort(key=lambda o: (o.usd_per_hour if o.usd_per_hour is not None else math.inf, o.gpus,
                                o.point.ttft_p99))
    return ServeSearch(options, rejected)


def hardware_names(request: dict[str, Any], result: Any) -> list[str]:
    """The hardware types searched, the requested first; from the options when the request
    does not name them (a document built from a bare search)."""
    names = ([request["requested_hardware"]] if request.get("requested_hardware") else []) + list(
        request.get("compared", []))
    for o in result.options:
        if o.hardware not in names:
            names.append(o.hardware)
    return names


def verdicts(result: Any) -> dict[int, str]:
    """The discrete-event check's verdict of each deployment it ran on (by id of the option)."""
    checks = getattr(result, "checks", None)
    return {} if checks is None else {id(c.option): c.verdict for c in checks.checks}
