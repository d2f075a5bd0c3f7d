"""Reliability: job interruption rate and MTBF by size, checkpoint intervals, goodput, spares.

Pure functions; the failure data come in as a loaded `FailureProfile`
(catalog/data/failures.yaml) and every rate says which cause and source it came from.

Rates. A profile counts interruptions per cause over an exposure of G GPUs in
G/g nodes for H hours. A cause that scales per GPU has rate count / (G * H) per
GPU-hour, one that scales per node count / (G/g * H) per node-hour. A job on N
GPUs in n nodes fails when any of its parts fails (components in series, as
Kokolis et al. 2025 find on Meta's research clusters: MTTF falls as 1/N), so

    lambda(N) = sum_c rate_c * units_c(N),   MTBF(N) = 1 / lambda(N).

Llama 3 (Dubey et al. 2024, Table 5): 419 unexpected interruptions in 54 days on
16,384 H100 -> 419 / (16,384 * 1,296 h) = 1.97e-5 per GPU-hour, an MTBF of 3.1 h for
the whole job.

Checkpoint interval, with delta the time a checkpoint blocks training and M the MTBF:
- Young (1974): tau = sqrt(2 * delta * M).
- Daly (2006, FGCS 22:303, eq. 37): for delta < 2M,
  tau = sqrt(2*delta*M) * (1 + sqrt(delta/(2M))/3 + (delta/(2M))/9) - delta, else tau = M.
Wall-clock model (Daly 2006, the higher-order model eq. 37 optimises), R the restart
time: T_wall = M * e^(R/M) * (e^((tau+delta)/M) - 1) * T_solve / tau, so the
effective training time ratio (goodput) is T_solve / T_wall.
Lost work per failure: with exponential failures, a failure inside a segment of
length T = tau + delta comes on average E = M - T / (e^(T/M) - 1) into it (T/2 when
T << M); that work is redone after a restart of R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # data sits in the catalog layer; only the type is needed
    from gpucluster.catalog.operations import FailureProfile

HOUR = 3600.0


@dataclass(frozen=True)
class CauseRate:
    name: str
    component: str
    per: str                 # gpu | node
    hardware: bool
    rate_per_unit_hour: float
    source: str              # the profile's source text for the count


@dataclass(frozen=True)
class FailureModel:
    """Per-unit failure rates of one profile; scale them to a job with `rate_per_hour`."""
    profile: str
    description: str
    causes: tuple[CauseRate, ...]

    def _units(self, per: str, gpus: int, gpus_per_node: int) -> float:
        return gpus if per == "gpu" else math.ceil(gpus / gpus_per_node)

    def rate_per_hour(self, gpus: int, gpus_per_node: int = 8, *, hardware_only: bool = False) -> float:
        """Interruptions per hour of a job on `gpus` GPUs (nodes of `gpus_per_node`)."""
        if gpus < 1 or gpus_per_node < 1:
            raise ValueError(f"need gpus >= 1 and gpus_per_node >= 1, got {gpus} and {gpus_per_node}")
        return sum(c.rate_per_unit_hour * self._units(c.per, gpus, gpus_per_node)
                   for c in self.causes if c.hardware or not hardware_only)

    def mtbf_hours(self, gpus: int, gpus_per_node: int = 8) -> float:
        return 1.0 / self.rate_per_hour(gpus, gpus_per_node)

    def by_component(self, gpus: int, gpus_per_node: int = 8) -> dict[str, float]:
        """Interruptions per hour by component, largest first."""
        out: dict[str, float] = {}
        for c in self.causes:
            out[c.component] = out.get(c.component, 0.0) + c.rate_per_unit_hour * self._units(
                c.per, gpus, gpus_per_node)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def node_down_rate_per_hour(self, gpus_per_node: int = 8) -> float:
        """Hardware failures per node-hour (what takes a node out for repair)."""
        return self.rate_per_hour(gpus_per_node, gpus_per_node, hardware_only=True)


def failure_model(profile: FailureProfile) -> FailureModel:
    """Rates per GPU-hour or node-hour from a profile's counts and exposure."""
    hours, gpus, nodes = profile.hours, profile.gpus.value, profile.nodes
    if hours <= 0 or gpus <= 0:
        raise ValueError(f"profile {profile.name}: exposure must be > 0 (gpus {gpus}, hours {hours})")
    causes = tuple(
        CauseRate(c.name, c.component, c.per, c.hardware,
                  c.count.value / ((gpus if c.per == "gpu" else nodes) * hours), profile.source_text(c.count.source))
        for c in profile.causes)
    return FailureModel(profile.name, profile.description, causes)


# -- checkpoint interval ---------------------------------------------------------------------

def _check(delta: float, mtbf: float) -> None:
    if not delta > 0 or not mtbf > 0 or math.isinf(delta) or math.isinf(mtbf):
        raise ValueError(f"need finite checkpoint time > 0 and MTBF > 0, got {delta} and {mtbf}")


def young_interval(delta: float, mtbf: float) -> float:
    """Young (1974): tau = sqrt(2 * delta * M), any time unit."""
    _check(delta, mtbf)
    return math.sqrt(2 * delta * mtbf)


def daly_interval(delta: float, mtbf: float) -> float:
    """Daly (2006) eq. 37, any time unit (delta and M in the same unit)."""
    _check(delta, mtbf)
    if delta >= 2 * mtbf:
        return mtbf
    x = delta / (2 * mtbf)
    return math.sqrt(2 * delta * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - delta


def expected_loss_in_segment(segment: float, mtbf: float) -> float:
    """Mean time into a segment of length T at which a failure inside it strikes:
    M - T / (e^(T/M) - 1) (-> T/2 for T << M)."""
    if segment <= 0:
        return 0.0
    x = segment / mtbf
    if x < 1e-6:
        return segment / 2
    if x > 700:                      # e^x overflows a float; T / (e^x - 1) is 0 to double precision
        return mtbf
    return mtbf - segment / math.expm1(x)


def goodput(tau: float, delta: float, mtbf: float, restart: float = 0.0) -> float:
    """Effective training time ratio T_solve / T_wall from Daly's (2006) wall-clock model:
    1 / (M/tau * e^(R/M) * (e^((tau+delta)/M) - 1)). In (0, 1]; 1 only without failures."""
    if tau <= 0 or delta < 0 or mtbf <= 0 or restart < 0:
        raise ValueError(f"need tau > 0, delta >= 0, M > 0, R >= 0; got {tau}, {delta}, {mtbf}, {restart}")
    if math.isinf(mtbf):
        return tau / (tau + delta)
    exponent = (tau + delta) / mtbf
    if restart / mtbf > 700 or exponent > 700:
        return 0.0
    wall = mtbf / tau * math.exp(restart / mtbf) * math.expm1(exponent)
    return min(1.0, 1.0 / wall)


@dataclass(frozen=True)
class IntervalPlan:
    """One checkpoint interval and what it costs (seconds)."""
    interval_s: float
    delta_s: float                 # blocking write time of one checkpoint
    mtbf_s: float
    restart_s: float               # restart after a failure (with reading the checkpoint)
    extra_loss_s: float            # work lost per failure beyond the segment (async copy lag)

    @property
    def lost_work_per_failure_s(self) -> float:
        """Work redone after a failure: mean time into the segment, plus the copy lag, plus the restart."""
        return (expected_loss_in_segment(self.interval_s + self.delta_s, self.mtbf_s)
                + self.extra_loss_s + self.restart_s)

    @property
    def goodput(self) -> float:
        return goodput(self.interval_s, self.delta_s, self.mtbf_s, self.restart_s + self.extra_loss_s)

    @property
    def checkpoint_overhead(self) -> float:
        """Fraction of time spent writing checkpoints, failure-free: delta / (tau + delta)."""
        return self.delta_s / (self.interval_s + self.delta_s)


def plan_interval(delta_s: float, mtbf_s: float, restart_s: float, *, interval_s: float | None = None,
                  extra_loss_s: float = 0.0, min_interval_s: float = 0.0) -> IntervalPlan:
    """Daly's optimal interval (or the given one), never shorter than `min_interval_s`
    (an async copy must finish before the next checkpoint starts)."""
    tau = daly_interval(delta_s, mtbf_s) if interval_s is None else interval_s
    return IntervalPlan(max(tau, min_interval_s), delta_s, mtbf_s, restart_s, extra_loss_s)


# -- spare nodes -----------------------------------------------------------------------------

def poisson_quantile(mean: float, q: float) -> int:
    """Smallest k with P(X <= k) >= q for X ~ Poisson(mean)."""
    if mean < 0 or not 0 < q < 1:
        raise ValueError(f"need mean >= 0 and 0 < q < 1, got {mean} and {q}")
    k, term = 0, math.exp(-mean)
    total = term
    while total < q and k < 100000:
        k += 1
        term *= mean / k
        total += term
    return k


@dataclass(frozen=True)
class Spares:
    nodes_down_mean: float         # nodes out for repair at any time, on average
    spares: int                    # spares so that P(down <= spares) >= quantile
    quantile: float
    repair_h: float
    node_rate_per_hour: float


def spare_nodes(nodes: int, node_rate_per_hour: float, repair_h: float, quantile: float = 0.99) -> Spares:
    """Nodes out for repair are Poisson with mean nodes * rate * repair time (Little's law);
    keep the `quantile` of it as spares so a restart rarely waits for a repair."""
    mean = nodes * node_rate_per_hour * repair_h
    return Spares(mean, poisson_quantile(mean, quantile), quantile, repair_h, node_rate_per_hour)
