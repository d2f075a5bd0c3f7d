"""Continuous batching: the analytic queueing model, and the discrete-event run that checks it."""

import math

import numpy as np
import pytest

from gpucluster.model.serving.batcher_sim import simulate
from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, analyze, max_rate, saturated


@pytest.fixture(scope="module")
def step(rep8b):
    return StepModel(rep8b)


def traffic(rate, s=512, o=256, dist="fixed"):
    return Traffic(rate, Lengths(s, dist), Lengths(o, dist))


def test_lengths():
    assert Lengths(100).quantile(0.99) == 100 and Lengths(100).cv2 == 0
    assert Lengths(100, "uniform").quantile(0.99) == pytest.approx(149)
    assert Lengths(100, "exponential").quantile(0.99) == pytest.approx(100 * math.log(100))


def test_light_load_is_one_request_alone(step):
    p = analyze(step, traffic(0.01), 256)
    assert p.stable and p.batch < 1
    assert p.tpot_p50 == pytest.approx(step.decode(1, 512 + 128), rel=0.05)
    assert p.ttft_p50 == pytest.approx(step.prefill(1, 512), rel=0.2)


def test_latency_grows_with_load_until_capacity(step):
    cap = saturated(step, traffic(1), 256).rate
    pts = [analyze(step, traffic(f * cap), 256) for f in (0.1, 0.4, 0.7, 0.9)]
    assert all(p.stable for p in pts)
    tpot = [p.tpot_p50 for p in pts if p.tpot_p50 is not None]
    assert len(tpot) == len(pts) and tpot == sorted(tpot)
    assert [p.ttft_p99 for p in pts] == sorted(p.ttft_p99 for p in pts)
    assert [p.batch for p in pts] == sorted(p.batch for p in pts)
    assert not analyze(step, traffic(1.2 * cap), 256).stable


def test_throughput_rises_with_the_batch(step):
    tps = [saturated(step, traffic(1), b).tokens_per_s for b in (1, 8, 64, 256)]
    assert tps == sorted(tps) and tps[-1] > 20 * tps[0]


def test_max_rate_meets_the_slos(step):
    r, p, why = max_rate(step, traffic(1), 256, 0.3, 0.03)
    assert p is not None and p.tpot_p99 is not None
    assert r > 0 and p.ttft_p99 <= 0.3 and p.tpot_p99 <= 0.03
    assert why in ("TTFT SLO", "TPOT SLO", "capacity")
    r0, _, why0 = max_rate(step, traffic(1), 256, None, 0.001)
    assert r0 == 0 and why0 == "TPOT SLO"


@pytest.mark.parametrize("dist", ["fixed", "exponential"])
def test_queueing_model_agrees_with_the_discrete_event_run(step, dist):
    cap = saturated(step, traffic(1), 256).rate
    t = traffic(0.5 * cap, dist=dist)
    model, sim = analyze(step, t, 256), simulate(step, t, 256, requests=3000, seed=3)
    assert sim.tpot_p50 == pytest.approx(model.tpot_p50, rel=0.15)
    assert sim.tpot_p99 == pytest.approx(model.tpot_p99, rel=0.30)
    assert sim.ttft_p50 == pytest.approx(model.ttft_p50, rel=0.25)
    assert sim.ttft_p99 == pytest.approx(model.ttft_p99, rel=0.45)
    assert sim.tokens_per_s == pytest.approx(model.tokens_per_s, rel=0.1)


@pytest.mark.parametrize("prompt, load", [(2048, 0.6), (2048, 0.85), (512, 0.85), (4096, 0.85)])
def test_ttft_p99_follows_the_bursts_of_long_prefills(step, prompt, load):
    """A long prefill iteration gathers the prompts of the next one, whose prefill is longer
    still: the p99 read at the mean iteration was 0.67x the run's for 2,048-token prompts at 60%
    load; the length-biased mixture over iteration types holds it within 12%."""
    cap = saturated(step, traffic(1, s=prompt), 256).rate
    t = traffic(load * cap, s=prompt)
    model, sim = analyze(step, t, 256), simulate(step, t, 256, requests=2000, seed=0)
    assert model.ttft_p99 == pytest.approx(sim.ttft_p99, rel=0.12)
    assert model.ttft_p50 == pytest.approx(sim.ttft_p50, rel=0.08)


@pytest.mark.parametrize("prompt, out, load, within", [(2048, 256, 0.6, 0.10), (4096, 128, 0.6, 0.35)])
def test_tpot_p99_counts_the_clustering_of_prefills(step, prompt, out, load, within):
    """A running sequence shares its iterations with the prefills of the prompts that arrive, and
    a long prefill lets in the prompts of the next: the count alone gave 0.86x the run's TPOT p99
    for 2,048-token prompts and 0.58x for 4,096-token ones at 60% load."""
    cap = saturated(step, traffic(1, s=prompt, o=out), 256).rate
    t = traffic(load * cap, s=prompt, o=out)
    model, sim = analyze(step, t, 256), simulate(step, t, 256, requests=2000, seed=0)
    assert model.tpot_p99 == pytest.approx(sim.tpot_p99, rel=within)


def test_prefill_variance_is_poisson_without_clustering_and_grows_with_it():
    from gpucluster.model.serving.prompt_chain import prefill_variance
    pre = lambda k: 0.01 * k  # noqa: E731  (linear: 10 ms per prompt)
    assert prefill_variance(1e-6, 0.5, pre) == pytest.approx(0.5 * 0.01 ** 2, rel=1e-3)
    assert prefill_variance(50.0, 0.5, pre) == pytest.approx(0.5 * 0.01 ** 2 / (1 - 0.5) ** 2)
    bins = (np.array([-0.005, 0.005]), np.array([0.5, 0.5]))
    assert prefill_variance(1e-6, 0.5, pre, bins) == pytest.approx(0.5 * (0.01 ** 2 + 0.005 ** 2), rel=1e-3)


def test_prefill_only_traffic(step):
    t = Traffic(20, Lengths(256), Lengths(1))
    model, sim = analyze(step, t, 512), simulate(step, t, 512, requests=3000, seed=1)
    assert model.tpot_p50 is None and sim.tpot_p50 is None
    assert sim.ttft_p50 == pytest.approx(model.ttft_p50, rel=0.25)
    assert sim.ttft_p99 == pytest.approx(model.ttft_p99, rel=0.45)


def test_simulation_is_deterministic(step):
    t = traffic(5, dist="uniform")
    a, b = simulate(step, t, 64, requests=300, seed=7), simulate(step, t, 64, requests=300, seed=7)
    assert a.ttfts == b.ttfts
    assert simulate(step, t, 64, requests=300, seed=8).ttfts != a.ttfts


def test_continuous_beats_windowed_beats_one_at_a_time(step):
    t = traffic(100, o=64)          # overload: every batcher runs flat out
    single = simulate(step, t, 256, mode="single", requests=150)
    window = simulate(step, t, 256, mode="window", window_s=0.01, requests=600)
    cont = simulate(step, t, 256, mode="continuous", requests=600)
    assert cont.tokens_per_s >= window.tokens_per_s > 5 * single.tokens_per_s
    assert single.mean_batch == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("k", [0.05, 0.5, 1.0, 2.5, 7.0])
def test_mean_prefill_of_poisson_prompts_is_exact_for_an_affine_prefill(k):
    """With a fixed cost per prefill iteration (5 ms) and 10 ms per prompt, Poisson prompts per
    iteration cost E[t(j)] = 5 (1 - e^-k) + 10 k: what the fixed point takes, not t(k)."""
    from gpucluster.model.serving.queueing import _poisson_prefill, _prefill_fixed

    def pre(x: float) -> float:    # interpolated between whole prompts, as the step tables are
        lo = math.floor(x)
        t = lambda j: 0.0 if j == 0 else 0.005 + 0.010 * j  # noqa: E731
        return x * t(1) if lo == 0 else t(lo) + (t(lo + 1) - t(lo)) * (x - lo)

    exact = sum(math.exp(-k) * k ** j / math.factorial(j) * (0.0 if j == 0 else 0.005 + 0.010 * j) for j in range(80))
    assert _prefill_fixed(pre) == pytest.approx(0.005)
    assert _poisson_prefill(pre, k, _prefill_fixed(pre)) == pytest.approx(exact, rel=1e-9)
