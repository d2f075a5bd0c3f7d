"""Reliability model: Daly's and Young's intervals against the paper, the Llama 3 rates,
invariants of MTBF and goodput, checkpoint sizes and times, spares, the seeds' claims."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.catalog.operations import failure_profiles
from gpucluster.errors import UserError
from gpucluster.model.checkpoint import checkpoint_options, checkpoint_size, transfer_s
from gpucluster.model.reliability import (
    daly_interval,
    expected_loss_in_segment,
    failure_model,
    goodput,
    plan_interval,
    poisson_quantile,
    spare_nodes,
    young_interval,
)
from gpucluster.plan.reliability_plan import (
    load_failure_model,
    reliability_plan,
    seed_claims,
)
from gpucluster.specs.cluster import load_cluster
from gpucluster.specs.workload import load_model_spec

ROOT = Path(__file__).resolve().parents[2]
MIN, HOUR = 60.0, 3600.0


# --- Daly (2006) eq. 37: the paper's test vectors, delta = 5 min ------------------------------

@pytest.mark.parametrize("mtbf_min, expected_min, tol", [(24 * 60, 117, 0.5), (6 * 60, 57, 0.5), (15, 9.1, 0.05)])
def test_daly_eq37_vectors(mtbf_min, expected_min, tol):
    assert daly_interval(5, mtbf_min) == pytest.approx(expected_min, abs=tol)


def test_daly_beyond_2m_is_m():
    assert daly_interval(10, 5) == 5
    assert daly_interval(10.0, 4.9) == 4.9


def test_young():
    # sqrt(2 * 5 min * 24 h) = 120 min; Daly adds its correction and subtracts delta
    assert young_interval(5, 1440) == pytest.approx(120)
    assert young_interval(5 * MIN, 24 * HOUR) == pytest.approx(120 * MIN)


@pytest.mark.parametrize("bad", [(0, 10), (-1, 10), (1, 0), (1, math.inf)])
def test_interval_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        daly_interval(*bad)


# --- Llama 3: 419 unexpected interruptions, 16,384 H100, 54 days -----------------------------

def test_llama3_counts_and_rate_per_gpu():
    prof = failure_profiles().get("llama3")
    assert sum(c.count.value for c in prof.causes) == 419
    assert prof.gpus.value == 16384 and prof.days.value == 54
    fm = failure_model(prof)
    per_gpu_hour = 419 / (16384 * 54 * 24)
    assert fm.rate_per_hour(16384, 8) == pytest.approx(419 / (54 * 24))
    assert fm.rate_per_hour(8, 8) / 8 == pytest.approx(per_gpu_hour)
    # "about one every 3 hours"
    assert fm.mtbf_hours(16384, 8) == pytest.approx(3.09, abs=0.01)


def test_llama3_components_gpu_first():
    fm = load_failure_model("llama3")
    comp = fm.by_component(16384, 8)
    assert list(comp)[:3] == ["gpu", "hbm", "software"]
    # faulty GPU 148 + system processor 17 + thermal 6 = 171 in 54 days
    assert comp["gpu"] == pytest.approx(171 / (54 * 24))
    assert sum(comp.values()) == pytest.approx(fm.rate_per_hour(16384, 8))
    hw = fm.rate_per_hour(16384, 8, hardware_only=True)
    assert hw == pytest.approx((419 - 54 - 7 - 2) / (54 * 24))  # software, NCCL watchdog, dependency


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 20000), k=st.integers(2, 16), profile=st.sampled_from(["llama3", "opt-175b", "bloom-176b"]))
def test_mtbf_falls_as_one_over_n(nodes, k, profile):
    fm = load_failure_model(profile)
    a = fm.mtbf_hours(nodes * 8, 8)
    b = fm.mtbf_hours(nodes * k * 8, 8)
    assert a / b == pytest.approx(k, rel=1e-9)


def test_unknown_profile_lists_valid():
    with pytest.raises(UserError, match="llama3"):
        load_failure_model("llama4")


def test_bad_failure_data_points_at_line(tmp_path):
    defaults = failure_profiles.__wrapped__.__defaults__
    assert defaults is not None
    src = Path(defaults[0])
    data = yaml.safe_load(src.read_text())
    data["profiles"][0]["causes"][0]["count"]["source"] = "nowhere"
    bad = tmp_path / "failures.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(UserError) as exc:
        failure_profiles.__wrapped__(bad)
    assert "nowhere" in exc.value.message and str(bad) in exc.value.message and exc.value.line


# --- goodput and lost work -------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(tau=st.floats(1, 1e5), delta=st.floats(0, 1e4), mtbf=st.floats(10, 1e7), restart=st.floats(0, 1e4))
def test_goodput_in_unit_interval(tau, delta, mtbf, restart):
    g = goodput(tau, delta, mtbf, restart)
    assert 0 <= g <= 1
    assert goodput(tau, delta, mtbf, restart + 100) <= g


def test_goodput_without_failures_is_write_overhead():
    assert goodput(100, 5, math.inf) == pytest.approx(100 / 105)


def test_daly_interval_is_near_the_best_of_the_wall_clock_model():
    delta, mtbf, restart = 5 * MIN, 6 * HOUR, 10 * MIN
    tau = daly_interval(delta, mtbf)
    best = max(goodput(t, delta, mtbf, restart) for t in range(60, 6 * 3600, 30))
    assert goodput(tau, delta, mtbf, restart) == pytest.approx(best, abs=1e-4)
    assert goodput(tau / 4, delta, mtbf, restart) < best and goodput(tau * 4, delta, mtbf, restart) < best


def test_more_frequent_checkpoints_cost_more_write_time():
    plans = [plan_interval(60, 24 * HOUR, 600, interval_s=t) for t in (300, 900, 1800, 3600)]
    overheads = [p.checkpoint_overhead for p in plans]
    assert overheads == sorted(overheads, reverse=True)
    lost = [p.lost_work_per_failure_s for p in plans]
    assert lost == sorted(lost)


def test_lost_work_in_segment():
    assert expected_loss_in_segment(60, 1e9) == pytest.approx(30, rel=1e-4)
    assert expected_loss_in_segment(3600, 3600) < 1800
    assert expected_loss_in_segment(0, 100) == 0


# --- checkpoint size and time ------------------------------------------------------------------

def test_checkpoint_sizes_bloom_and_70b():
    # BLOOM-176B's "2.3 TB" checkpoint: 176e9 x 14 bytes = 2.46e12 B = 2.24 TiB
    gpt3 = checkpoint_size(load_model_spec("GPT-3-175B"))
    assert gpt3.total_bytes / 2**40 == pytest.approx(2.23, abs=0.05)
    assert gpt3.total_bytes == pytest.approx(174.6e9 * 14, rel=1e-3)
    assert checkpoint_size(load_model_spec("llama3-70b")).total_bytes == pytest.approx(70.55e9 * 14, rel=1e-3)


def test_checkpoint_time_by_tier():
    spec = load_cluster(ROOT / "examples" / "ng8-32node.yaml")
    size = 1e12
    opts = {o.name: o for o in checkpoint_options(spec, size, 32)}
    assert opts["lustre"].delta_s == pytest.approx(size / 200e9)          # the 200 GB/s appliance
    assert opts["s3"].delta_s == pytest.approx(size / 25e9)
    local = opts["hot-nvme -> lustre"]
    assert local.delta_s == pytest.approx(size / 32 / 15e9)               # 15 GB/s per node, 32 nodes at once
    assert local.copy_s == pytest.approx(opts["lustre"].delta_s) and local.durable


def test_node_links_cap_a_fast_tier():
    spec = load_cluster(ROOT / "examples" / "h100-64-ib.yaml")
    nfs = next(t for t in spec.storage if t.name == "nfs")
    t, why = transfer_s(1e12, nfs, 8, 100.0)
    assert t == pytest.approx(1e12 / 1e9) and "nfs" in why
    t, why = transfer_s(1e12, nfs.model_copy(update={"write_gbps": 10000}), 2, 100.0)
    assert t == pytest.approx(1e12 / 200e9) and "node links" in why


# --- the plan on a cluster -----------------------------------------------------------------

def test_plan_on_ng8_prefers_a_durable_fast_tier():
    spec = load_cluster(ROOT / "examples" / "ng8-32node.yaml")
    plan = reliability_plan(spec, load_model_spec("llama3-70b"), interval_s=1800)
    assert plan.mtbf_s / HOUR == pytest.approx(3.093 * 16384 / 256, rel=1e-3)
    best = plan.best
    assert best.option.durable and best.option.name != "s3"
    assert 0.98 < best.optimal.goodput < 1
    s3 = plan.option("s3")
    assert s3.optimal.goodput < best.optimal.goodput
    assert s3.optimal.lost_work_per_failure_s > best.optimal.lost_work_per_failure_s
    with pytest.raises(UserError, match="lustre"):
        plan.option("gpfs")


def test_spares():
    assert poisson_quantile(0, 0.99) == 0
    assert poisson_quantile(6, 0.99) == 12
    # OPT-175B: ~2 machines down a day on 128 nodes; with a 3-day repair the 99% quantile is 12 spare
    # nodes, the number OPT kept (the match rests on the 3-day repair estimate)
    opt = load_failure_model("opt-175b")
    s = spare_nodes(128, opt.node_down_rate_per_hour(8), 72)
    assert s.nodes_down_mean == pytest.approx(6) and s.spares == 12


def test_seed_claims_against_profiles():
    llama = {c.nodes: c for c in seed_claims(load_failure_model("llama3"))}
    # the seed says failures come ~4x more often than Llama 3 measured at 256 and 1,000 nodes
    assert llama[256].model_mtbf_h == pytest.approx(24.7, abs=0.1) and 3.5 < llama[256].ratio < 4.5
    assert llama[1000].model_mtbf_h == pytest.approx(6.33, abs=0.01)
    # and ~7.6x at 10,000 nodes, where its own numbers stop falling as 1/N
    assert llama[10000].model_mtbf_h * 60 == pytest.approx(38, abs=0.5)
    # OPT-175B's rate (2 nodes a day in 128) gives the seed's 6 h at 256 nodes and ~92 min at 1,000
    opt = {c.nodes: c for c in seed_claims(load_failure_model("opt-175b"))}
    assert opt[256].model_mtbf_h == pytest.approx(6.0) and opt[1000].model_mtbf_h * 60 == pytest.approx(92.2, abs=0.1)
