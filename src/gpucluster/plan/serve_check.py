"""`plan serve --simulate`: the discrete-event check of the ranked deployments.

The search ranks deployments with the queueing model (model/serving/queueing.py); its p99s
are approximations, and the batcher simulation (model/serving/batcher_sim.py) of one replica
at its share of the rate can break an SLO the model said was met. The check simulates
candidates cheapest first and stops at the first that meets every SLO given: that one is
recommended, the ones before it are rejected with the simulated p99 that broke the SLO.
The candidates are the ranked deployments and, for each that breaks an SLO, the same shape
with more replicas (each at a lower share of the rate): the fewest at which the queueing
model's p99s, scaled by the simulated/model ratio just seen, meet the SLOs (up to
MAX_REPLICA_SCALE times what the queueing model asked for; none when the p99 does not fall
with the load), ranked among them by cost: more replicas of a cheap shape often cost less
than the next shape. It simulates at most
MAX_CHECKS candidates (each run is 0.2-0.5 s of CPU); when none of them passes, the
recommendation stays the search's cheapest, flagged, and the gap (the closest deployment and
by how much it misses) is reported.

A CPU deployment cannot be checked (the batcher simulation models GPUs only): it is skipped,
recorded as "not simulated", and neither recommended nor rejected by the check.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from gpucluster.plan.serve_search import Option, Rejected, ServeSearch

# The most deployments the check simulates, cheapest first (each run: 2,000 requests).
MAX_CHECKS = 8
# A deployment that breaks an SLO in simulation is tried again with more replicas (each at a lower
# share of the rate), in steps of 10%, up to 2x what the queueing model asked for: past that the
# next shape is the better bet, and each try costs a run.
REPLICA_STEP = 1.1
MAX_REPLICA_SCALE = 2.0
SIM_REQUESTS = 2000
SIM_SEED = 0


@dataclass
class SimCheck:
    """One deployment through the discrete-event check."""
    option: Option
    sim: Any                                  # batcher_sim.SimResult; None: not simulated (CPU)
    failures: list[str] = field(default_factory=list)   # "TTFT p99 341.2 ms > SLO 300 ms", ...
    over: float = 0.0                         # worst simulated p99 / its SLO (> 1: the SLO is broken)

    @property
    def simulated(self) -> bool:
        return self.sim is not None

    @property
    def passed(self) -> bool:
        return self.sim is not None and not self.failures

    @property
    def verdict(self) -> str:
        if self.sim is None:
            return "not simulated (the batcher simulation models GPUs only)"
        return "meets the SLOs" if not self.failures else "breaks " + "; ".join(self.failures)


@dataclass
class SimChecks:
    """The checks in the order they ran, and what came of them."""
    checks: list[SimCheck]
    chosen: Option | None                     # the first deployment that passed; None: none did
    max_checks: int
    options_total: int                        # deployments the search ranked (the check's candidates)
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    not_reached: int = 0                      # ranked deployments never simulated (the limit came first)

    @property
    def passed(self) -> bool:
        return self.chosen is not None

    @property
    def rejected(self) -> list[SimCheck]:
        return [c for c in self.checks if c.simulated and not c.passed]

    @property
    def closest(self) -> SimCheck | None:
        """The simulated deployment nearest to its SLOs (smallest worst ratio)."""
        sims = [c for c in self.checks if c.simulated]
        return min(sims, key=lambda c: c.over) if sims else None

    def summary(self) -> str:
        """One line: what the check found, for the terminal, the JSON and the HTML report."""
        n = sum(c.simulated for c in self.checks)
        if self.chosen is not None:
            k = len(self.rejected)
            if k == 0:
                return "the recommended deployment meets the SLOs in the discrete-event check"
            return (f"{k} cheaper deployment{'s' if k > 1 else ''} broke an SLO in the discrete-event check and "
                    f"{'were' if k > 1 else 'was'} rejected; the recommended one is the cheapest that passes")
        c = self.closest
        gap = (f"; the closest, {_name(c.option)}, {c.verdict} ({c.over:.2f}x the SLO)" if c is not None else "")
        left = self.not_reached
        more = (f"; {left} costlier deployment{'s' if left > 1 else ''} not simulated (at most {self.max_checks} "
                "runs)") if left > 0 else ""
        return (f"NO deployment checked meets the SLOs in the discrete-event check ({n} simulated){gap}{more}: "
                "the recommendation below is the queueing model's and breaks the SLOs in simulation")


def _name(o: Option) -> str:
    shape = "CPU node" if o.hardware[0].isdigit() else f"TP{o.tp} x PP{o.pp}"
    return f"{o.replicas:,} x {o.hardware} {shape}"


def simulate_option(spec: Any, fabrics: list[Any], option: Option, traffic: Any, quant: Any, rate: float,
                    engine: str | None = None) -> Any:
    """A discrete-event run of one replica of `option` at its share of the rate; None for a CPU
    deployment (the batcher simulation models GPUs only)."""
    from gpucluster.model.serving.batcher_sim import simulate as run_sim
    from gpucluster.model.serving.queueing import Traffic

    step = _step(spec, fabrics, option, quant, engine)
    if step is None:
        return None
    per = Traffic(rate / option.replicas, traffic.input, traffic.output)
    return run_sim(step, per, option.max_batch, requests=SIM_REQUESTS, seed=SIM_SEED)


def judge(option: Option, sim: Any, slo_ttft_s: float | None, slo_tpot_s: float | None) -> SimCheck:
    """Which SLOs the simulated p99s break, and the worst ratio to its SLO."""
    if sim is None:
        return SimCheck(option, None)
    ratios: list[tuple[float, str]] = []
    for what, got, slo in (("TTFT", sim.ttft_p99, slo_ttft_s), ("TPOT", sim.tpot_p99, slo_tpot_s)):
        if slo is not None and got is not None:
            ratios.append((got / slo, f"{what} p99 {got * 1e3:,.1f} ms > SLO {slo * 1e3:g} ms"))
    ratios.sort(reverse=True)       # the worst-broken SLO first
    return SimCheck(option, sim, [text for r, text in ratios if r > 1], ratios[0][0] if ratios else 0.0)


def _cost_key(o: Option) -> tuple[float, float]:
    """The search's ranking key (serve_search.search): rented $/hour, then TTFT p99."""
    return (o.usd_per_hour if o.usd_per_hour is not None else math.inf, o.point.ttft_p99)


def _step(spec: Any, fabrics: list[Any], option: Option, quant: Any, engine: str | None) -> Any:
    from gpucluster.model.serving.queueing import StepModel
    from gpucluster.model.serving.step_time import Replica

    fab = next((f for f in fabrics if f.gpu_name == option.hardware), None)
    return None if fab is None else StepModel(Replica(spec, fab, option.tp, option.pp, quant, engine))


def more_replicas(spec: Any, fabrics: list[Any], option: Option, base: Option, sim: Any, traffic: Any,
                  quant: Any, rate: float, engine: str | None, slo_ttft_s: float | None,
                  slo_tpot_s: float | None) -> Option | None:
    """`option`'s shape with the fewest more replicas (steps of REPLICA_STEP, up to
    MAX_REPLICA_SCALE times what the queueing model asked for: `base`) at which the queueing
    model's p99s, times the simulated/model ratio seen at `option`'s load, meet the SLOs the
    simulation broke; None when no count does (a p99 that does not fall with the load: prefill of
    long prompts, not queueing) or for a CPU deployment."""
    from gpucluster.model.serving.queueing import Traffic, analyze

    step = _step(spec, fabrics, option, quant, engine)
    if step is None:
        return None
    broken = [(attr, slo, getattr(sim, attr) / getattr(option.point, attr))
              for attr, slo in (("ttft_p99", slo_ttft_s), ("tpot_p99", slo_tpot_s))
              if slo is not None and getattr(sim, attr) is not None and getattr(sim, attr) > slo
              and getattr(option.point, attr)]
    replicas = option.replicas
    while broken:
        replicas = max(replicas + 1, math.ceil(replicas * REPLICA_STEP))
        if replicas > base.replicas * MAX_REPLICA_SCALE:
            return None
        point = analyze(step, Traffic(rate / replicas, traffic.input, traffic.output), option.max_batch)
        if all((getattr(point, attr) or math.inf) * ratio <= slo for attr, slo, ratio in broken):
            scale = replicas / option.replicas
            return dataclasses.replace(
                option, replicas=replicas, point=point, per_replica_rate=rate / replicas,
                limit="discrete-event check",
                binding=(f"SLO in the discrete-event check ({replicas:,} replicas where the queueing model's "
                         f"SLOs allow {base.replicas:,})"),
                usd_per_hour=None if option.usd_per_hour is None else option.usd_per_hour * scale,
                own_usd_per_hour=None if option.own_usd_per_hour is None else option.own_usd_per_hour * scale)
    return None


def check(spec: Any, fabrics: list[Any], result: ServeSearch, traffic: Any, quant: Any, rate: float,
          engine: str | None, slo_ttft_s: float | None, slo_tpot_s: float | None,
          max_checks: int = MAX_CHECKS, simulate: Any = None) -> SimChecks:
    """Simulate deployments cheapest first until one meets the SLOs (at most `max_checks`
    simulations). The candidates are the ranked deployments and, for each that breaks an SLO in
    simulation, the same shape with REPLICA_STEP times the replicas (a lower load per replica),
    ranked among them by cost. `simulate` replaces simulate_option (tests)."""
    run = simulate or simulate_option
    checks: list[SimCheck] = []
    chosen = None
    pool = [(o, o) for o in result.options]            # (candidate, the ranked deployment it came from)
    reached = 0
    while pool and sum(c.simulated for c in checks) < max_checks:
        o, base = pool.pop(0)
        reached += o is base
        c = judge(o, run(spec, fabrics, o, traffic, quant, rate, engine), slo_ttft_s, slo_tpot_s)
        checks.append(c)
        if c.passed:
            chosen = o
            break
        v = more_replicas(spec, fabrics, o, base, c.sim, traffic, quant, rate, engine, slo_ttft_s,
                          slo_tpot_s) if c.simulated else None
        if v is not None:
            at = next((i for i, (p, _) in enumerate(pool) if _cost_key(p) > _cost_key(v)), len(pool))
            pool.insert(at, (v, base))
    return SimChecks(checks, chosen, max_checks, len(result.options), slo_ttft_s, slo_tpot_s,
                     len(result.options) - reached)


def apply(result: ServeSearch, checks: SimChecks) -> None:
    """Move the deployments that broke an SLO in simulation out of the ranking (into `rejected`,
    reason "simulated TTFT SLO" / "simulated TPOT SLO") and put the first that passed first, so it
    is the recommended deployment; when none passed, the ranking stays as the queueing model has it."""
    result.checks = checks
    if checks.chosen is None:
        return
    dropped = {id(c.option) for c in checks.rejected} | {id(checks.chosen)}
    # The chosen one first: the only deployments it can pass here are CPU nodes the check could
    # not simulate (ranked with no rental price, like a GPU without one).
    result.options = [checks.chosen] + [o for o in result.options if id(o) not in dropped]
    simulated = []
    for c in checks.rejected:
        o = c.option
        worst = c.failures[0][:4]                  # "TTFT" or "TPOT": the worst-broken SLO
        model = o.point.ttft_p99 if worst == "TTFT" else o.point.tpot_p99
        simulated.append(Rejected(
            o.hardware, o.tp, o.pp, f"simulated {worst} SLO",
            f"{o.replicas:,} replicas: discrete-event check {'; '.join(c.failures)} "
            f"(the queueing model: {worst} p99 {(model or 0) * 1e3:,.1f} ms)", c.over))
    result.rejected[:0] = simulated                # first: what the user most needs to see
