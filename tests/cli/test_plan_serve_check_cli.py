"""`gpucluster plan serve` in-process (typer's CliRunner), issue 22: the discrete-event check
moves past deployments that break an SLO and says so; the header names the recommended
hardware; the best deployment per hardware type; $ per million input + output tokens.
Terminal, JSON and HTML."""

from __future__ import annotations

import html
import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gpucluster.plan import serve_check

BASE = ["plan", "serve", "--model", "llama3-8b", "--rate", "1000", "--slo-ttft", "300ms", "--slo-tpot", "40ms"]


def _invoke(*args: str) -> str:
    from gpucluster.cli.app import app
    from gpucluster.report.terminal import console

    # The console keeps the width it saw when made (at first import, in whatever test ran first).
    width = console.width
    console.width = 250
    try:
        res = CliRunner().invoke(app, [*BASE, *args], catch_exceptions=False, env={"NO_COLOR": "1"})
    finally:
        console.width = width
    assert res.exit_code == 0, res.output
    return res.stdout


def _fail_first(n_fail: int, monkeypatch):
    """The batcher simulation replaced: the first n_fail deployments simulated break TTFT (2x)."""
    ran = []

    def run(spec, fabrics, o, traffic, quant, rate, engine):
        ran.append(o)
        f = 2.0 if len(ran) <= n_fail else 0.5
        p = o.point
        return SimpleNamespace(requests=1800, ttft_p50=p.ttft_p50, ttft_p99=0.3 * f, tpot_p50=p.tpot_p50,
                               tpot_p99=0.02, tokens_per_s=p.tokens_per_s, mean_batch=p.batch)
    monkeypatch.setattr(serve_check, "simulate_option", run)
    return ran


def _text(path) -> str:
    s = path.read_text()
    s = re.sub(r"<script.*?</script>", " ", s[s.find("<body"):], flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", s)))


def test_simulate_moves_to_the_next_deployment_and_says_so(monkeypatch, tmp_path):
    ran = _fail_first(1, monkeypatch)
    out = _invoke("--gpu", "H100:8", "--simulate", "--html", str(tmp_path / "r.html"))
    first, second = ran[0], ran[1]
    assert "Discrete-event check: 1 cheaper deployment broke an SLO" in out
    assert f"FAIL {first.replicas:,} x {first.hardware} TP{first.tp} x PP{first.pp}" in out
    assert "breaks TTFT p99 600.0 ms > SLO 300 ms" in out
    assert (f"Recommended deployment: {second.replicas:,} replicas of {second.hardware} "
            f"TP{second.tp} x PP{second.pp}") in out
    page = _text(tmp_path / "r.html")
    assert "Discrete-event check of the ranked deployments" in page and "breaks TTFT p99 600.0 ms" in page
    assert f"Serve with {second.replicas:,} replica(s) of {second.hardware}" in page

    ran.clear()
    doc = json.loads(_invoke("--gpu", "H100:8", "--simulate", "--json"))
    checks = doc["simulation_checks"]
    assert checks["passed"] and [c["passed"] for c in checks["checks"]] == [False, True]
    assert checks["checks"][0]["verdict"] == "breaks TTFT p99 600.0 ms > SLO 300 ms"
    assert (doc["best"]["tp"], doc["best"]["pp"]) == (checks["checks"][1]["tp"], checks["checks"][1]["pp"])
    assert doc["rejected"][0]["reason"] == "simulated TTFT SLO"
    assert doc["simulation"]["meets_slos"] is True


def test_simulate_reports_the_gap_when_none_passes(monkeypatch):
    _fail_first(10_000, monkeypatch)
    out = _invoke("--gpu", "H100:8", "--simulate")
    assert "NO deployment checked meets the SLOs in the discrete-event check" in out
    assert "breaks the SLOs in simulation" in out and "2.00x the SLO" in out
    doc = json.loads(_invoke("--gpu", "H100:8", "--simulate", "--json"))
    assert doc["simulation_checks"]["passed"] is False and doc["simulation"]["meets_slos"] is False
    assert len(doc["simulation_checks"]["checks"]) == serve_check.MAX_CHECKS


def test_the_header_names_the_recommended_hardware():
    # K80 has no bf16/fp16: the recommendation is necessarily the compared H100.
    out = _invoke("--gpu", "K80:8", "--compare", "H100")
    header = out.split("Recommended deployment")[0].replace("\n", " ")
    assert "on H100-SXM5-80GB (compared; requested: 1 x 8 K80" in header
    out = _invoke("--gpu", "H100:8")
    header = out.split("Recommended deployment")[0].replace("\n", " ")
    assert "on H100-SXM5-80GB (requested: 1 x 8 H100-SXM5-80GB" in header and "compared" not in header
    doc = json.loads(_invoke("--gpu", "K80:8", "--compare", "H100", "--json"))
    assert doc["request"]["requested_hardware"] == "K80" and doc["request"]["compared"] == ["H100-SXM5-80GB"]
    assert doc["best"]["hardware"] == "H100-SXM5-80GB"


def test_compare_gives_the_best_per_hardware_type(tmp_path):
    args = ("--gpu", "H100:8", "--compare", "A100-SXM4-80GB,K80")
    doc = json.loads(_invoke(*args, "--json"))
    rows = doc["best_per_hardware"]
    assert [r["hardware"] for r in rows] == ["H100-SXM5-80GB", "A100-SXM4-80GB", "K80"]
    assert sum(r["recommended"] for r in rows) == 1
    out = _invoke(*args, "--html", str(tmp_path / "r.html"))
    table = out.split("Best deployment per hardware type")[1]
    for r in rows[:2]:
        cheapest = next(a for a in doc["alternatives"] if a["hardware"] == r["hardware"])
        assert r["usd_per_mtok"] == pytest.approx(cheapest["usd_per_mtok"])
        assert re.search(rf"{r['hardware']} .*TP{r['tp']} x PP{r['pp']} .* {r['usd_per_mtok']:.3f} .* "
                         rf"{r['usd_per_mtok_in_out']:.3f}", table)
    assert "no deployment: precision" in table
    page = _text(tmp_path / "r.html")
    assert "Best deployment per hardware type" in page and "no deployment: precision" in page
    # One hardware type: no summary.
    assert "Best deployment per hardware type" not in _invoke("--gpu", "H100:8")


def test_cost_per_million_input_and_output_tokens(tmp_path):
    doc = json.loads(_invoke("--gpu", "H100:8", "--input", "1000", "--output", "200", "--json"))
    for d in [doc["best"], *doc["alternatives"]]:
        assert d["usd_per_mtok_in_out"] == pytest.approx(d["usd_per_hour"] / (1000 * 1200 * 3600) * 1e6)
    assert set(doc["cost_formulas"]) == {"usd_per_mtok", "usd_per_mtok_in_out"}
    out = _invoke("--gpu", "H100:8", "--input", "1000", "--output", "200", "--html", str(tmp_path / "r.html"))
    flat = out.replace("\n", " ")
    assert f"${doc['best']['usd_per_mtok_in_out']:.3f} rented per million input + output tokens" in flat
    assert "$/hour / (rate x (1000 + 200) tokens x 3600) x 1e6" in flat
    assert "$/Mtok in+out" in out
    page = _text(tmp_path / "r.html")
    assert f"${doc['best']['usd_per_mtok_in_out']:.3f} per million input + output tokens" in page
    assert "$ per M input + output tokens" in page and "(input + output) tokens x 3600" in page
