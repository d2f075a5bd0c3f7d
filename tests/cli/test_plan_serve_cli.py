"""`gpucluster plan serve` through the real console script."""

import json

from tests_cli_helpers import assert_one_line_error, run


def test_json_recommendation_70b():
    data = json.loads(run("plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "1000",
                          "--input", "512", "--output", "256", "--slo-ttft", "500ms", "--slo-tpot", "50ms",
                          "--precision", "fp8", "--json", check_rc=0).stdout)
    best = data["best"]
    assert best["replicas"] * best["per_replica_max_rate"] >= 1000 * 0.999
    assert best["gpus"] == best["replicas"] * best["tp"] * best["pp"]
    op = best["operating_point"]
    assert op["ttft_p99_s"] <= 0.5 and op["tpot_p99_s"] <= 0.05
    assert best["usd_per_mtok"] > 0 and "$/GPU-hour" in best["price_source"]
    assert data["request"]["slo_tpot_s"] == 0.05
    assert len(data["alternatives"]) >= 3


def test_human_output_has_the_pieces():
    out = run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "200", "--slo-tpot", "40ms",
              "--compare", "H200,A100-SXM4-80GB", "--simulate", "--top", "50", check_rc=0).stdout
    for piece in ("Recommended deployment", "replica", "TTFT p50/p99", "TPOT p50/p99", "per million output tokens",
                  "Binding constraint", "Discrete-event check", "H200-SXM-141GB", "A100-SXM4-80GB", "$/Mtok"):
        assert piece in out, piece


def test_prefill_only_with_cpu_alternative():
    out = run("plan", "serve", "--model", "llama2-7b", "--gpu", "H100:8", "--rate", "50k", "--input", "256",
              "--output", "1", "--slo-ttft", "50ms", "--cpu", "EPYC-9654:2", "--json", check_rc=0).stdout
    data = json.loads(out)
    assert data["best"]["operating_point"]["tpot_p50_s"] is None
    assert data["best"]["operating_point"]["ttft_p99_s"] <= 0.05


def test_model_that_fits_nowhere():
    assert_one_line_error(run("plan", "serve", "--model", "llama3.1-405b", "--gpu", "H100:8", "--nodes", "1",
                              "--rate", "10"), "--model", "fits on no replica", "GiB per GPU")


def test_slo_no_configuration_meets():
    assert_one_line_error(run("plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "10",
                              "--precision", "fp8", "--slo-tpot", "2ms"),
                          "--slo-tpot", "no configuration meets TPOT", "x over")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "10",
                              "--precision", "fp8", "--slo-ttft", "1ms"), "--slo-ttft", "TTFT")


def test_bad_inputs():
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "-5"),
                          "--rate", "> 0")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "lots"),
                          "--rate")
    assert_one_line_error(run("plan", "serve", "--model", "llama-9", "--gpu", "H100:8", "--rate", "5"), "unknown")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "5",
                              "--slo-ttft", "soon"), "--slo-ttft")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "5",
                              "--precision", "int3"), "--precision")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--rate", "5"), "--gpu")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "5",
                              "--input", "0"), "--input")
    assert_one_line_error(run("plan", "serve", "--model", "llama3-8b", "--gpu", "H100:8", "--rate", "5",
                              "--cpu", "Pentium"), "--cpu", "unknown")
