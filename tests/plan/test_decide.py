"""The decision ladder and build-or-rent: structure and consistency, not thresholds."""

from __future__ import annotations

import math

import pytest

from gpucluster.catalog import catalog
from gpucluster.model.transformer_flops import model_flops_per_iteration
from gpucluster.plan.decide import build_or_rent, cpu_rung, ladder, synthetic_cluster
from gpucluster.specs.workload import load_model_spec

SEVEN_B = load_model_spec("llama2-7b")


def test_without_deadline_the_smallest_that_fits():
    rungs, answer = ladder(SEVEN_B, "H200", "NDR400", tokens=int(10e9))
    assert answer is not None and answer.label == "1 GPU" and answer.fits
    rungs, answer = ladder(load_model_spec("llama3-70b"), "H200", "NDR400", tokens=int(1e9))
    assert not rungs[1].fits and "fits on no layout" in rungs[1].reason      # 70B does not fit one GPU
    assert answer is not None and answer.label == "1 node (8 GPUs)"


def test_deadline_picks_the_first_rung_in_time():
    rungs, answer = ladder(SEVEN_B, "H200", "NDR400", tokens=int(10e9), deadline_s=24 * 3600)
    gpu = [r for r in rungs if r.kind == "gpu"]
    assert gpu[-1] is answer and answer.meets_deadline
    assert all(not r.fits or not r.meets_deadline for r in gpu[:-1])
    times = [r.time_s for r in gpu if r.time_s is not None]
    assert len(times) == len(gpu) and times == sorted(times, reverse=True)    # more GPUs, less time
    mtbf = [r.mtbf_s for r in gpu if r.mtbf_s is not None]
    assert len(mtbf) == len(gpu) and mtbf == sorted(mtbf, reverse=True)      # and more failures


def test_cpu_rung_is_flops_over_peak():
    r = cpu_rung(SEVEN_B, int(1e9), "EPYC-9654", 2)
    flops = model_flops_per_iteration(SEVEN_B, 1, SEVEN_B.seq_len) / SEVEN_B.seq_len * 1e9
    assert r.time_s == pytest.approx(flops / (2 * catalog.cpus.get("EPYC-9654").peak_fp32_tflops.value * 1e12))


def test_build_or_rent_is_consistent():
    _, answer = ladder(SEVEN_B, "H200", "NDR400", tokens=int(10e9))
    assert answer is not None and answer.gpu_hours is not None
    short = build_or_rent(answer, "H200", "NDR400", None)
    assert short.answer == "rent" and short.run_rent_usd == pytest.approx(answer.gpu_hours * 3.50)
    be = short.break_even_months
    if math.isfinite(be):
        long = build_or_rent(answer, "H200", "NDR400", be * 2)
        assert long.answer == "build" and long.build_total_usd < long.rent_total_usd


def test_synthetic_cluster_switch_matches_the_nic():
    assert synthetic_cluster("H200", 8, 4, "NDR400").fabric.switch == "QM9700"
    assert synthetic_cluster("H100", 8, 4, "Ethernet-100G").fabric.switch_entry.fabric != "infiniband"
    assert synthetic_cluster("H200", 8, 64, "NDR400").fabric.topology == "fat-tree"
