"""Cost: build (capital and operating) against rent, break-even month, TCO, cost per run and per token.

Build, capital: per pool either the spec's whole-node price, or the node's parts
(GPUs, CPUs, DRAM, NVMe, NICs, the server around them); the fabric's switches and
cables as `model/topology.py` counts them for the fat tree (node-to-leaf copper,
switch-to-switch optical); shared storage by capacity; one management node; racks;
cooling capacity for the IT load; installation as a fraction of the hardware.
Build, operating (per year): energy = IT kW x (idle + (1 - idle) x utilization) x
8,760 h x PUE x $/kWh; staff = GPUs / GPUs per FTE x cost of one FTE; software
licences per GPU; hardware maintenance as a fraction of hardware; floor space per rack.
Rent: the same GPUs at $/GPU-hour. On demand and spot you pay for the hours used
(utilization x 8,760 a year); reserved capacity is paid for every hour, at a discount.

Break-even month m: capital + operating x m = rent x m, so m = capital / (rent - operating)
a month (never, when renting costs less than operating). TCO over Y years = capital +
Y x operating; no discounting, no resale value, no price changes (stated in results).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

HOURS_PER_YEAR = 8760.0
MONTHS_PER_YEAR = 12.0


@dataclass(frozen=True)
class PriceSet:
    """Resolved prices: a value and its origin for every key; `notes` holds the full title of
    every source an origin cites by id."""
    values: dict[str, float]
    origins: dict[str, str]
    notes: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> float:
        return self.values[key]

    def origin(self, key: str) -> str:
        return self.origins[key]

    def with_(self, key: str, value: float, origin: str) -> PriceSet:
        return PriceSet({**self.values, key: value}, {**self.origins, key: origin}, self.notes)


@dataclass(frozen=True)
class LineItem:
    category: str          # servers | network | storage | facility | installation | power | staff | software ...
    name: str
    quantity: float
    unit_usd: float
    origin: str            # where the unit price comes from

    @property
    def total_usd(self) -> float:
        return self.quantity * self.unit_usd


@dataclass
class BuildCost:
    gpus: int
    capex: list[LineItem]
    opex_per_year: list[LineItem]
    assumptions: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)   # source id -> full title, for cited origins

    @property
    def capex_usd(self) -> float:
        return sum(i.total_usd for i in self.capex)

    @property
    def opex_usd_per_year(self) -> float:
        return sum(i.total_usd for i in self.opex_per_year)

    def by_category(self, items: list[LineItem]) -> dict[str, float]:
        out: dict[str, float] = {}
        for i in items:
            out[i.category] = out.get(i.category, 0.0) + i.total_usd
        return out

    def tco_usd(self, years: float) -> float:
        return self.capex_usd + years * self.opex_usd_per_year


@dataclass(frozen=True)
class RentOption:
    name: str              # on-demand | reserved | spot
    usd_per_gpu_hour: float
    paid_fraction: float   # of all hours in a year that are paid for
    origin: str

    def usd_per_year(self, gpus: int) -> float:
        return gpus * HOURS_PER_YEAR * self.paid_fraction * self.usd_per_gpu_hour


def rent_options(on_demand: float, origin: str, utilization: float, reserved_discount: float,
                 spot_discount: float) -> list[RentOption]:
    """On demand and spot pay for the hours used; reserved pays every hour, discounted."""
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be in (0, 1], got {utilization}")
    return [
        RentOption("on-demand", on_demand, utilization, origin),
        RentOption("reserved", on_demand * (1 - reserved_discount), 1.0,
                   f"on-demand x (1 - {reserved_discount:g} reserved discount)"),
        RentOption("spot", on_demand * (1 - spot_discount), utilization,
                   f"on-demand x (1 - {spot_discount:g} spot discount); preemptions not modelled"),
    ]


def break_even_months(capex_usd: float, opex_usd_per_year: float, rent_usd_per_year: float) -> float:
    """Months until owning costs less than renting in total; inf if renting is cheaper to run."""
    monthly_gap = (rent_usd_per_year - opex_usd_per_year) / MONTHS_PER_YEAR
    if monthly_gap <= 0:
        return math.inf
    return capex_usd / monthly_gap


def cumulative(capex_usd: float, opex_usd_per_year: float, rent_usd_per_year: float, months: int
               ) -> list[tuple[int, float, float]]:
    """(month, build so far, rent so far) for months 0..`months`."""
    return [(m, capex_usd + opex_usd_per_year * m / MONTHS_PER_YEAR, rent_usd_per_year * m / MONTHS_PER_YEAR)
            for m in range(months + 1)]


def build_usd_per_gpu_hour(build: BuildCost, years: float, utilization: float) -> float:
    """TCO over `years` spread over the GPU-hours actually used."""
    return build.tco_usd(years) / (build.gpus * HOURS_PER_YEAR * years * utilization)


def energy_usd_per_year(it_kw: float, pue: float, usd_per_kwh: float, utilization: float, idle_fraction: float
                        ) -> float:
    """A year of IT load at idle + (1 - idle) x utilization of full power, times PUE."""
    load = idle_fraction + (1 - idle_fraction) * utilization
    return it_kw * load * HOURS_PER_YEAR * pue * usd_per_kwh


def usd_per_million_tokens(usd_per_gpu_hour: float, gpus: int, tokens_per_s: float) -> float:
    """Serving cost: GPU-hours per million tokens x price."""
    if tokens_per_s <= 0:
        raise ValueError(f"tokens per second must be > 0, got {tokens_per_s}")
    return usd_per_gpu_hour * gpus / (tokens_per_s * 3600) * 1e6


def run_cost_usd(gpu_hours: float, usd_per_gpu_hour: float, goodput: float = 1.0) -> float:
    """A training run's GPU-hours at a price, divided by the effective training time ratio."""
    if not 0 < goodput <= 1:
        raise ValueError(f"goodput must be in (0, 1], got {goodput}")
    return gpu_hours / goodput * usd_per_gpu_hour
