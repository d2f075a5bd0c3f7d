"""`gpucluster advise` through the real console script."""

import json

from tests_cli_helpers import assert_one_line_error, run


def test_advise_json():
    data = json.loads(run("advise", "--model", "llama2-7b", "--tokens", "10B", "--deadline", "24h", "--json",
                          check_rc=0).stdout)
    assert data["schema"] == "gpucluster-advise/v1"
    kinds = [r["kind"] for r in data["rungs"]]
    assert kinds[0] == "cpu" and set(kinds[1:]) == {"gpu"}
    assert data["answer"] == data["rungs"][-1]["label"] and data["rungs"][-1]["meets_deadline"]
    b = data["build_or_rent"]
    assert b["answer"] in ("build", "rent") and b["capex_usd"] > 0


def test_advise_human_with_serving():
    out = run("advise", "--model", "llama2-7b", "--tokens", "10B", "--rate", "50", check_rc=0).stdout
    assert "Answer" in out and "Build or rent" in out and "Serving" in out and "CPU" in out


def test_advise_bad_input():
    assert_one_line_error(run("advise", "--model", "llama2-7b", "--deadline", "soon"), "--deadline")
    assert_one_line_error(run("advise", "--model", "llama2-7b", "--gpu", "H900"), "H900")
    assert_one_line_error(run("advise", "--model", "llama2-7b", "--cpu", "EPYC-9654:x"), "--cpu")
    assert_one_line_error(run("advise", "--model", "llama2-7b", "--months", "0"), "--months")


def test_without_a_deadline_the_answer_states_the_assumed_one_and_the_token_budget():
    out = run("advise", "--model", "llama3-70b", "--tokens", "2T", check_rc=0).stdout
    assert "deadline: 90.0 days (assumed" in out and "tokens: 2,000B (given)" in out
    doc = json.loads(run("advise", "--model", "llama3-70b", "--json", check_rc=0).stdout)
    assert doc["deadline_source"].startswith("assumed") and "Chinchilla" in doc["tokens_source"]
    assert doc["answer"] != "1 node (8 GPUs)"


def test_times_on_a_gpu_without_its_own_runs_are_marked_assumed():
    # H200 (the default) has no published training run: every GPU rung says so, in JSON and text.
    doc = json.loads(run("advise", "--model", "llama2-7b", "--tokens", "10B", "--deadline", "24h", "--json",
                         check_rc=0).stdout)
    fitted = [r for r in doc["rungs"] if r["kind"] == "gpu" and r["fits"]]
    assert fitted and all(r["confidence"] == "assumed" for r in fitted)
    assert any("no published bf16 training run on H200" in a for a in fitted[-1]["assumptions"])
    out = run("advise", "--model", "llama2-7b", "--tokens", "10B", "--deadline", "24h", check_rc=0).stdout
    assert "assumed, not validated" in out and "sustained fraction" in out
