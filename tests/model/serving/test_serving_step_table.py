"""The step-time tables (step_table.py) are the scalar step-time model (step_time.py) evaluated on
arrays: equal to it entry by entry, and the queueing model reads the same numbers through them."""

import math

import numpy as np
import pytest

from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, analyze, max_rate
from gpucluster.model.serving.step_table import decode_totals, prefill_totals
from gpucluster.model.serving.step_time import Replica, decode_step_time, prefill_time
from gpucluster.plan.fabric_from import from_flags
from gpucluster.specs.workload import load_model_spec

REL = 1e-12   # numpy's hypot, power and the collective model's array path round like the scalar ones to an ulp or so

# Dense GQA, MoE (grouped experts, touched-expert counts), and MLA (DeepSeek); one and several
# pipeline stages (micro-batches, hops across nodes); weights at 16, 8 and 4 bits.
SHAPES = [
    ("llama3-8b", "H100:8", 1, 1, Quant("bf16")),
    ("llama3-70b", "H100:8", 2, 1, Quant("fp8")),
    ("llama3-70b", "A100-SXM4-80GB:8", 8, 2, Quant("int4", "bf16")),
    ("mixtral-8x7b", "MI300X:8", 4, 1, Quant("bf16")),
    ("mixtral-8x7b", "H100:8", 8, 4, Quant("fp8")),
    ("deepseek-v3", "H200:8", 8, 8, Quant("fp8")),
    # engines: no CUDA graphs and 16-bit experts (LMDeploy) with expert parallelism; NCCL all-reduce
    # (gpt-fast); the default engine's measured custom all-reduce on a chip that has one
    ("mixtral-8x7b", "H100:8", 8, 1, Quant("fp8"), "lmdeploy", 4),
    ("llama3-70b", "A100-SXM4-80GB:8", 4, 1, Quant("bf16"), "gpt-fast", 1),
    ("llama3-70b", "H200:8", 8, 1, Quant("fp8", "fp8"), "vllm", 1),
]


@pytest.fixture(scope="module", params=SHAPES,
                ids=lambda s: f"{s[0]}-{s[1]}-tp{s[2]}-pp{s[3]}-{s[4].weights}" + "".join(f"-{x}" for x in s[5:]))
def rep(request):
    model, gpu, tp, pp, quant, *engine_ep = request.param
    return Replica(load_model_spec(model), from_flags(gpu, 8, "NDR400", None).fabric, tp, pp, quant, *engine_ep)


def _same(got: float, want: float) -> bool:
    return got == pytest.approx(want, rel=REL)


def test_decode_table_equals_the_scalar_model(rep):
    batches = np.array([1, 2, 3, 7, 8, 9, 31, 64, 100, 255, 256, 511, 512, 1000, 4096])
    for context in (64, 448, 8192):
        table = decode_totals(rep, batches, context)
        for b, t in zip(batches.tolist(), table.tolist(), strict=True):
            assert _same(t, decode_step_time(rep, b, context).total), (b, context)


def test_prefill_table_equals_the_scalar_model(rep):
    batches = np.array([1, 2, 3, 4, 5, 8, 9, 16, 17, 64])
    for tokens in (16, 512, 2048):
        table = prefill_totals(rep, batches, tokens)
        for b, t in zip(batches.tolist(), table.tolist(), strict=True):
            assert _same(t, prefill_time(rep, b, tokens).total), (b, tokens)
    # Pairs of (batch, prompt length) broadcast together, as the length quantiles ask.
    lengths = np.array([16, 48, 512, 2096])
    grid = prefill_totals(rep, batches[None, :], lengths[:, None])
    for i, s in enumerate(lengths.tolist()):
        for j, b in enumerate(batches.tolist()):
            assert _same(float(grid[i, j]), prefill_time(rep, b, s).total)


def test_step_model_reads_the_tables_like_the_scalar_model(rep):
    """StepModel: interpolation between whole batches, beyond the first block, below one prompt."""
    step = StepModel(rep)
    dec, pre = step.decoder(448.0), step.prefiller(512.0)
    for n in (0.0, 0.3, 1.0, 1.5, 17.25, 511.9, 512.0, 512.5, 700.0, 1024.0, 1500.3):
        lo, hi = max(1, math.floor(n)), max(1, math.ceil(n))
        want = 0.0 if n <= 0 else decode_step_time(rep, lo, 448).total + (
            decode_step_time(rep, hi, 448).total - decode_step_time(rep, lo, 448).total) * (n - lo)
        assert dec(n) == step.decode(n, 448.0)
        assert _same(step.decode(n, 448.0), want) or want == 0.0 == step.decode(n, 448.0)
    for k in (0.0, 0.25, 1.0, 2.5, 16.0, 63.5, 64.0, 70.2, 200.0):
        lo, hi = math.floor(k), math.ceil(k)
        t_hi = prefill_time(rep, hi, 512).total if k > 0 else 0.0
        want = 0.0 if k <= 0 else (k * t_hi if lo == 0 else
                                   prefill_time(rep, lo, 512).total + (t_hi - prefill_time(rep, lo, 512).total) * (k - lo))
        assert pre(k) == step.prefill(k, 512.0)
        assert _same(step.prefill(k, 512.0), want) or want == 0.0 == step.prefill(k, 512.0)
    lengths = [3.0, 100.0, 512.0, 700.0, 2100.0]
    assert step.prefills(lengths) == [step.prefill(1, s) for s in lengths]


def test_analyze_without_latency_changes_only_ttft(rep8b):
    step = StepModel(rep8b)
    for rate in (5.0, 10.0, 20.0, 40.0):
        t = Traffic(rate, Lengths(512, "exponential"), Lengths(256, "exponential"))
        full, lean = analyze(step, t, 256), analyze(step, t, 256, latency=False)
        assert full.stable == lean.stable == (rate < 40)   # 40/s is beyond this replica's capacity
        if full.stable:
            assert math.isnan(lean.ttft_p50) and math.isnan(lean.ttft_p99)
        else:
            assert lean.ttft_p99 == full.ttft_p99 == math.inf
        for f in ("iteration_s", "batch", "prefill_share", "tpot_p50", "tpot_p99", "tokens_per_s"):
            assert getattr(lean, f) == getattr(full, f), f


def test_max_rate_point_is_the_full_analysis_at_that_rate(rep8b):
    """The rate search probes without TTFT when no TTFT SLO needs it; the point it returns is
    still the whole analysis at the rate it found."""
    step = StepModel(rep8b)
    t = Traffic(1.0, Lengths(512), Lengths(256))
    for slo_ttft, slo_tpot in ((None, None), (None, 0.03), (0.2, None)):
        r, point, _ = max_rate(step, t, 256, slo_ttft, slo_tpot)
        assert point is not None and r > 0
        again = analyze(step, Traffic(r, t.input, t.output), 256)
        assert (point.ttft_p99, point.tpot_p99, point.iteration_s) == (again.ttft_p99, again.tpot_p99, again.iteration_s)


def test_bisection_reads_the_tables_as_decode_and_prefill_do(rep8b):
    """The bisection's inlined iteration time is decode(n) + prefill(k) (with decode work: the
    mean over Poisson prompts per iteration, _poisson_prefill), also beyond the first table blocks
    (batches over 512, prompts per iteration over 64) and for prefill-only traffic."""
    from gpucluster.model.serving.queueing import _iteration_time, _poisson_prefill, _prefill_fixed

    step = StepModel(rep8b)
    for D, S, top_n, kmax in ((255.0, 512.0, 512.0, 16.0), (63.0, 32.0, 2048.0, 256.0), (0.0, 256.0, 256.0, 32.0)):
        ctx = S + 1 + D / 2
        dec, pre = step.decoder(ctx), step.prefiller(S)
        for lam in (0.5, 40.0, 3000.0):
            fixed = _prefill_fixed(pre) if D else 0.0
            f = _iteration_time(step.first_blocks(ctx, S), dec, pre, lam, D, top_n, kmax, fixed)
            for T in (1e-12, 1e-4, 3e-3, 0.02, 0.1, 0.7, 5.0):
                n = min(lam * D * T, top_n) if D else 0.0
                k = lam * T
                if D:
                    want = step.decode(n, ctx) + _poisson_prefill(pre, min(k, kmax), fixed)
                else:
                    want = step.prefill(min(max(k, 1.0), kmax), S)
                assert f(T) == pytest.approx(want, rel=1e-12, abs=1e-15), (D, S, lam, T)
