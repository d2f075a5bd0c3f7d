"""`gpucluster plan serve --json`: schema gpucluster-plan-serve/v1."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from gpucluster.documents.base import Document, Num, Strict

SCHEMA: Final = "gpucluster-plan-serve/v1"
USD_PER_MTOK: Final = "$ per million output tokens = $/hour / (rate x output tokens x 3600) x 1e6"
USD_PER_MTOK_IN_OUT: Final = ("$ per million input + output tokens = $/hour / (rate x (input + output) tokens x 3600) "
                              "x 1e6 (the basis of prices that bill prompt and output tokens alike)")


class Request(Strict):
    """The request as given (flags or API arguments), resolved: durations in seconds."""
    model: str
    rate: Num
    input: int
    output: int
    lengths: Literal["fixed", "uniform", "exponential"]
    slo_ttft_s: Num | None
    slo_tpot_s: Num | None
    weights: str
    kv: str
    engine: str | None = None       # serving engine (catalog/data/engines.yaml); None: the default
    target: str
    gpus_per_node: int
    nodes: int | None
    requested_hardware: str | None = Field(None, description="the GPU type of --gpu/--cluster (the node type searched)")
    compared: list[str] = Field(default_factory=list,
                                description="the other hardware searched: --compare GPU types, --cpu nodes")


class OperatingPoint(Strict):
    rate_per_replica: Num
    mean_batch: Num
    iteration_s: Num
    prefill_share: Num
    ttft_p50_s: Num | None
    ttft_p99_s: Num | None
    tpot_p50_s: Num | None
    tpot_p99_s: Num | None
    output_tokens_per_s: Num


class Range(Strict):
    lo: Num
    hi: Num


class Intervals(Strict):
    """The calibrated intervals of a deployment's figures (catalog/data/intervals.yaml: the
    cross-validated errors of the regime it falls in: chip measured, engine validated, MoE)."""
    level: Num = Field(description="the intervals' coverage target, e.g. 0.8")
    regime: str
    basis: str = Field(description="the cases and sources the throughput interval comes from (pooling, widening)")
    ttft_basis: str | None = None
    tpot_basis: str | None = None
    per_replica_max_rate: Range
    replicas: Range
    ttft_p50_s: Range | None = None
    ttft_p99_s: Range | None = None
    tpot_p50_s: Range | None = None
    tpot_p99_s: Range | None = None
    usd_per_mtok: Range | None = None
    own_usd_per_mtok: Range | None = None
    cost_within_best_interval: bool | None = Field(
        None, description="alternatives: the cost per token is not told apart from the recommended one's")


class Deployment(Strict):
    hardware: str
    tp: int
    pp: int
    processors_per_replica: int
    replicas: int
    gpus: int
    max_batch: int
    kv_fits_sequences: int
    per_replica_max_rate: Num
    limit: str
    binding: str
    operating_point: OperatingPoint
    output_tokens_per_s: Num
    usd_per_hour: Num | None
    usd_per_mtok: Num | None = Field(description=USD_PER_MTOK)
    own_usd_per_mtok: Num | None
    usd_per_mtok_in_out: Num | None = Field(None, description=USD_PER_MTOK_IN_OUT)
    own_usd_per_mtok_in_out: Num | None = None
    price_source: str | None
    weights_gib_per_gpu: Num | None
    serving_efficiency: Num
    serving_efficiency_source: str
    intervals: Intervals | None = None


class Rejected(Strict):
    hardware: str
    tp: int
    pp: int
    reason: str
    detail: str


class Simulation(Strict):
    """The discrete-event check of one replica of the recommended deployment (--simulate)."""
    hardware: str | None = None
    tp: int | None = None
    pp: int | None = None
    replicas: int | None = None
    meets_slos: bool | None = Field(None, description="the simulated p99s are within every SLO given")
    failures: list[str] = Field(default_factory=list, description="the SLOs the simulated p99s break")
    requests: int
    ttft_p50_s: Num | None
    ttft_p99_s: Num | None
    tpot_p50_s: Num | None
    tpot_p99_s: Num | None
    output_tokens_per_s: Num
    mean_batch: Num


class SimulationCheck(Strict):
    """One deployment through the discrete-event check, cheapest first."""
    hardware: str
    tp: int
    pp: int
    replicas: int
    gpus: int
    usd_per_mtok: Num | None
    model_ttft_p99_s: Num | None = Field(description="the queueing model's p99 at the operating point")
    model_tpot_p99_s: Num | None
    simulated: bool = Field(description="false: a CPU deployment (the batcher simulation models GPUs only)")
    ttft_p99_s: Num | None = Field(description="the simulated p99")
    tpot_p99_s: Num | None
    passed: bool
    verdict: str
    worst_over_slo: Num = Field(description="the worst simulated p99 / its SLO (> 1: the SLO is broken)")


class SimulationChecks(Strict):
    """--simulate: the ranked deployments simulated cheapest first until one meets the SLOs."""
    passed: bool = Field(description="a deployment checked meets every SLO; false: the gap is in `summary`")
    summary: str
    max_checks: int
    deployments_ranked: int
    checks: list[SimulationCheck]


class HardwareBest(Strict):
    """--compare / --cpu: the cheapest deployment of one hardware type, or why there is none."""
    hardware: str
    requested: bool
    recommended: bool
    tp: int | None = None
    pp: int | None = None
    replicas: int | None = None
    gpus: int | None = None
    usd_per_hour: Num | None = None
    usd_per_mtok: Num | None = None
    usd_per_mtok_in_out: Num | None = None
    own_usd_per_mtok: Num | None = None
    ttft_p99_s: Num | None = None
    tpot_p99_s: Num | None = None
    binding: str | None = None
    simulation: str | None = Field(None, description="the discrete-event check's verdict, when it ran on this one")
    reason: str = Field("", description="why this type has no deployment")


class PlanServeDocument(Document):
    OMIT_NONE = ("simulation", "simulation_checks")

    schema_: Literal["gpucluster-plan-serve/v1"] = Field(SCHEMA, alias="schema")
    request: Request
    best: Deployment
    alternatives: list[Deployment]
    rejected: list[Rejected]
    best_per_hardware: list[HardwareBest] = Field(default_factory=list)
    cost_formulas: dict[str, str] = Field(default_factory=dict)
    simulation: Simulation | None = None
    simulation_checks: SimulationChecks | None = None


def _intervals(o: Any, rate: float, out_tokens: float, spec: Any, engine: str | None,
               best: dict[str, Any] | None) -> Intervals:
    import math

    from gpucluster.plan.confidence import serving_intervals

    iv = serving_intervals(o, rate, out_tokens, moe=spec is not None and spec.experts > 1, engine=engine)
    cap = iv["per_replica_rate"]
    rng = {k: Range(lo=v.lo, hi=v.hi) for k, v in iv.items() if k != "per_replica_rate"}
    key = "usd_per_mtok" if "usd_per_mtok" in iv else "own_usd_per_mtok"
    tie = None
    if best is not None and key in iv and key in best:
        tie = best[key].contains(iv[key].point) or iv[key].contains(best[key].point)
    return Intervals(level=cap.level, regime=cap.regime, basis=cap.basis,
                     ttft_basis=iv["ttft_p50_s"].basis if "ttft_p50_s" in iv else None,
                     tpot_basis=iv["tpot_p50_s"].basis if "tpot_p50_s" in iv else None,
                     per_replica_max_rate=Range(lo=cap.lo, hi=cap.hi),
                     replicas=Range(lo=math.ceil(rate / cap.hi), hi=math.ceil(rate / cap.lo)), **rng,
                     cost_within_best_interval=tie)


def deployment(o: Any, rate: float, out_tokens: float, spec: Any = None, engine: str | None = None,
               best: dict[str, Any] | None = None, in_tokens: float = 0.0) -> Deployment:
    p = o.point
    return Deployment(
        hardware=o.hardware, tp=o.tp, pp=o.pp, processors_per_replica=o.gpus_per_replica, replicas=o.replicas,
        gpus=o.gpus, max_batch=o.max_batch, kv_fits_sequences=o.memory_batch, per_replica_max_rate=o.per_replica_rate,
        limit=o.limit, binding=o.binding,
        operating_point=OperatingPoint(rate_per_replica=p.rate, mean_batch=p.batch, iteration_s=p.iteration_s,
                                       prefill_share=p.prefill_share, ttft_p50_s=p.ttft_p50, ttft_p99_s=p.ttft_p99,
                                       tpot_p50_s=p.tpot_p50, tpot_p99_s=p.tpot_p99, output_tokens_per_s=p.tokens_per_s),
        output_tokens_per_s=rate * out_tokens, usd_per_hour=o.usd_per_hour,
        usd_per_mtok=o.usd_per_mtok(rate, out_tokens), own_usd_per_mtok=o.usd_per_mtok(rate, out_tokens, own=True),
        usd_per_mtok_in_out=o.usd_per_mtok_in_out(rate, in_tokens, out_tokens),
        own_usd_per_mtok_in_out=o.usd_per_mtok_in_out(rate, in_tokens, out_tokens, own=True),
        price_source=o.price_source, weights_gib_per_gpu=o.weights_gib, serving_efficiency=o.efficiency[0],
        serving_efficiency_source=o.efficiency[1], intervals=_intervals(o, rate, out_tokens, spec, engine, best))


def _checks(checks: Any, rate: float, out: float) -> SimulationChecks:
    rows = [SimulationCheck(
        hardware=c.option.hardware, tp=c.option.tp, pp=c.option.pp, replicas=c.option.replicas, gpus=c.option.gpus,
        usd_per_mtok=c.option.usd_per_mtok(rate, out), model_ttft_p99_s=c.option.point.ttft_p99,
        model_tpot_p99_s=c.option.point.tpot_p99, simulated=c.simulated,
        ttft_p99_s=c.sim.ttft_p99 if c.simulated else None, tpot_p99_s=c.sim.tpot_p99 if c.simulated else None,
        passed=c.passed, verdict=c.verdict, worst_over_slo=c.over) for c in checks.checks]
    return SimulationChecks(passed=checks.passed, summary=checks.summary(), max_checks=checks.max_checks,
                            deployments_ranked=checks.options_total, checks=rows)


def _per_hardware(result: Any, request: dict[str, Any]) -> list[HardwareBest]:
    from gpucluster.plan.serve_search import hardware_names, verdicts

    rate, inp, out = request["rate"], request["input"], request["output"]
    seen = verdicts(result)
    rows = []
    for name, o, why in result.best_per_hardware(hardware_names(request, result)):
        row = HardwareBest(hardware=name, requested=name == request.get("requested_hardware"),
                           recommended=o is not None and o is result.best, reason=why)
        if o is not None:
            row = row.model_copy(update=dict(
                tp=o.tp, pp=o.pp, replicas=o.replicas, gpus=o.gpus, usd_per_hour=o.usd_per_hour,
                usd_per_mtok=o.usd_per_mtok(rate, out), usd_per_mtok_in_out=o.usd_per_mtok_in_out(rate, inp, out),
                own_usd_per_mtok=o.usd_per_mtok(rate, out, own=True), ttft_p99_s=o.point.ttft_p99,
                tpot_p99_s=o.point.tpot_p99, binding=o.binding, simulation=seen.get(id(o))))
        rows.append(row)
    return rows


def build(result: Any, request: dict[str, Any], sim: Any = None, spec: Any = None) -> PlanServeDocument:
    """The document of a serving search (plan/serve_search.py SearchResult), the request as
    resolved, and the discrete-event check when one ran. `spec` (the model) sets the MoE
    regime of the intervals; without it they are a dense model's."""
    from gpucluster.plan.confidence import serving_intervals

    rate, inp, out = request["rate"], request["input"], request["output"]
    engine = request.get("engine")
    moe = spec is not None and spec.experts > 1
    best = serving_intervals(result.best, rate, out, moe=moe, engine=engine)
    checks = getattr(result, "checks", None)
    mine = next((c for c in checks.checks if c.option is result.best), None) if checks is not None else None
    return PlanServeDocument(
        request=Request(**request), best=deployment(result.best, rate, out, spec, engine, in_tokens=inp),
        alternatives=[deployment(o, rate, out, spec, engine, best, in_tokens=inp) for o in result.options],
        rejected=[Rejected(hardware=r.hardware, tp=r.tp, pp=r.pp, reason=r.reason, detail=r.detail)
                  for r in result.rejected],
        best_per_hardware=_per_hardware(result, request),
        cost_formulas={"usd_per_mtok": USD_PER_MTOK, "usd_per_mtok_in_out": USD_PER_MTOK_IN_OUT},
        simulation_checks=None if checks is None else _checks(checks, rate, out),
        simulation=None if sim is None else Simulation(
            hardware=result.best.hardware, tp=result.best.tp, pp=result.best.pp, replicas=result.best.replicas,
            meets_slos=None if mine is None else mine.passed, failures=[] if mine is None else mine.failures,
            requests=sim.requests, ttft_p50_s=sim.ttft_p50, ttft_p99_s=sim.ttft_p99, tpot_p50_s=sim.tpot_p50,
            tpot_p99_s=sim.tpot_p99, output_tokens_per_s=sim.tokens_per_s, mean_batch=sim.mean_batch))
