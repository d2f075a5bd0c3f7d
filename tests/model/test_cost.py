"""Cost model: arithmetic by hand, break-even, the seeds' figures, price provenance and overrides."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpucluster.errors import UserError
from gpucluster.model.cost import (HOURS_PER_YEAR, break_even_months, cumulative, energy_usd_per_year, rent_options,
                                   run_cost_usd, usd_per_million_tokens)
from gpucluster.model.topology import fabric_of
from gpucluster.plan.cost_plan import base_prices, cost_plan, load_price_file
from gpucluster.specs.cluster import load_cluster

ROOT = Path(__file__).resolve().parents[2]


def example(name):
    return load_cluster(ROOT / "examples" / f"{name}.yaml")


def test_break_even_formula():
    assert break_even_months(1200, 0, 1200) == pytest.approx(12)
    assert break_even_months(1200, 600, 1200) == pytest.approx(24)
    assert break_even_months(1200, 1200, 1000) == math.inf
    rows = cumulative(1200, 600, 1200, 24)
    assert rows[24][1] == pytest.approx(rows[24][2])        # the lines cross at month 24


def test_seed_build_vs_rent_arithmetic():
    # Seed 1: hardware $9.2M, facilities $480K/yr, staff $320K/yr; rent 256 GPUs at $4.50/GPU-hour.
    rent = 256 * 4.50 * HOURS_PER_YEAR
    assert rent == pytest.approx(10.09e6, rel=1e-3)          # the seed writes $9.8M/yr
    months = break_even_months(9.2e6, 0.48e6 + 0.32e6, rent)
    assert months == pytest.approx(11.9, abs=0.1)            # the seed says 18 months; its own numbers give 12
    assert break_even_months(9.2e6, 0.8e6, 9.8e6) == pytest.approx(12.3, abs=0.1)


def test_rent_options():
    on, res, spot = rent_options(4.0, "x", 0.5, 0.35, 0.6)
    assert on.usd_per_year(10) == pytest.approx(10 * HOURS_PER_YEAR * 0.5 * 4.0)
    assert res.usd_per_year(10) == pytest.approx(10 * HOURS_PER_YEAR * 4.0 * 0.65)   # every hour, discounted
    assert spot.usd_per_gpu_hour == pytest.approx(1.6)
    with pytest.raises(ValueError):
        rent_options(4.0, "x", 0, 0.35, 0.6)


def test_energy_and_tokens_and_runs():
    assert energy_usd_per_year(100, 1.5, 0.1, 1.0, 0.25) == pytest.approx(100 * HOURS_PER_YEAR * 1.5 * 0.1)
    assert energy_usd_per_year(100, 1.5, 0.1, 0.0, 0.25) == pytest.approx(0.25 * 100 * HOURS_PER_YEAR * 1.5 * 0.1)
    # 8 GPUs at $2/h serving 10,000 tokens/s: $16/h for 36M tokens
    assert usd_per_million_tokens(2.0, 8, 10000) == pytest.approx(16 / 36)
    assert run_cost_usd(1000, 2.0, 0.8) == pytest.approx(2500)
    with pytest.raises(ValueError):
        usd_per_million_tokens(2.0, 8, 0)


def test_ng8_counts_from_topology_and_spec_prices():
    spec = example("ng8-32node")
    plan = cost_plan(spec)
    items = {i.name: i for i in plan.build.capex}
    node = items["ng8: node (8 x H200-SXM-141GB, whole)"]
    assert node.quantity == 32 and node.unit_usd == 380000 and "prices.node_purchase_usd" in node.origin
    tree = fabric_of(spec)
    assert items["switches QM9700"].quantity == tree.switches == 12
    assert items["switch-switch optical cables"].quantity == tree.optical_cables
    assert items["switch-switch optical cables"].unit_usd == 500
    assert items["node-leaf copper cables"].unit_usd == base_prices()["copper_cable_usd"]
    assert plan.build.capex_usd == pytest.approx(sum(i.total_usd for i in plan.build.capex))
    # every line says where its price came from
    assert all(i.origin for i in (*plan.build.capex, *plan.build.opex_per_year))
    assert 30 < plan.break_even("on-demand") < 45


def test_min_viable_cluster_near_the_seeds_450k():
    plan = cost_plan(example("seed-figures/min-8xh200"))
    cats = plan.build.by_category(plan.build.capex)
    assert cats["servers"] == pytest.approx(8 * 32000 + 2 * 11805 + 1536 * 5 + 8 * 2200 + 50000 + 7.68 * 110)
    assert 400e3 < plan.build.capex_usd < 500e3          # seed: $450K


def test_512_gpu_tco_is_above_the_seeds_range():
    plan = cost_plan(example("seed-figures/tco-512-h200"))
    tco = plan.build.tco_usd(3)
    gpus_alone = 512 * 32000
    assert gpus_alone > 14e6                              # the GPUs alone exceed the seed's low end
    assert tco > 18e6                                     # seed: $14-18M
    assert plan.build.gpus == 512


def test_more_utilization_means_earlier_break_even():
    spec = example("ng8-32node")
    months = [cost_plan(spec, utilization=u).break_even("on-demand") for u in (0.5, 0.8, 1.0)]
    assert months[0] > months[1] > months[2]


def test_overrides_win_and_are_named():
    plan = cost_plan(example("h200-256-ndr400"), overrides={"fte_usd_per_year": (100000.0, "--price fte")})
    staff = next(i for i in plan.build.opex_per_year if i.category == "staff")
    assert staff.unit_usd == 100000 and "--price fte" in staff.origin
    with pytest.raises(UserError, match="unknown price 'fte_usd'"):
        cost_plan(example("h200-256-ndr400"), overrides={"fte_usd": (1.0, "x")})
    with pytest.raises(UserError, match="--years"):
        cost_plan(example("h200-256-ndr400"), years=0)
    with pytest.raises(UserError, match="--utilization"):
        cost_plan(example("h200-256-ndr400"), utilization=1.5)


def test_price_file(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("prices:\n  usd_per_kwh: 0.2\n  pue: {value: 1.1}\n")
    assert load_price_file(str(f)) == {"usd_per_kwh": (0.2, "p.yaml: usd_per_kwh"), "pue": (1.1, "p.yaml: pue")}
    f.write_text("prices:\n  usd_per_kwh: cheap\n")
    with pytest.raises(UserError) as exc:
        load_price_file(str(f))
    assert exc.value.line == 2 and exc.value.field == "usd_per_kwh"
