"""`gpucluster plan train` through the real console script."""

import json

from tests_cli_helpers import assert_one_line_error, run


def test_plan_on_the_example_cluster_json():
    data = json.loads(run("plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
                          "--tokens", "15T", "--json", check_rc=0).stdout)
    best = data["best"]
    assert data["target"]["gpus"] == 256 and best["fits"]
    lay = best["layout"]
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"] == 256
    assert abs(sum(best["terms_s"].values()) - best["step_s"]) < 1e-6
    steps = 15e12 / (data["global_batch"] * data["seq_len"])
    assert abs(data["time_to_train_s"] - steps * best["step_s"]) / data["time_to_train_s"] < 1e-9
    assert abs(data["gpu_hours"] - data["time_to_train_s"] * 256 / 3600) < 1e-3
    assert 0.2 < best["mfu"] < 0.8


def test_100gbe_case_study_names_the_network():
    out = run("plan", "train", "--cluster", "examples/h200-256-100gbe.yaml", "--model", "llama3-70b",
              "--tokens", "1T", check_rc=0).stdout
    assert "Bottleneck: the network" in out and "NDR400" in out and "x faster" in out


def test_human_output_has_the_pieces():
    out = run("plan", "train", "--gpu", "H100:8", "--nodes", "4", "--model", "llama2-7b", "--tokens", "100B",
              check_rc=0).stdout
    for piece in ("Recommended layout", "Step time breakdown", "Memory per GPU", "Time to train", "GPU-hours",
                  "Top", "Bottleneck"):
        assert piece in out, piece


def test_explicit_layout_that_does_not_fit():
    proc = run("plan", "train", "--gpu", "H100:8", "--nodes", "8", "--model", "llama3-70b",
               "--layout", "tp=1,pp=1,dp=64,cp=1,ep=1,v=1,mb=1,recompute=none,zero=0")
    assert_one_line_error(proc, "--layout", "needs", "GiB per GPU", "smallest change that fits")


def test_layout_product_mismatch_and_bad_keys():
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--nodes", "8", "--model", "llama3-70b",
                              "--layout", "tp=8,pp=4,dp=3,cp=1,ep=1,v=1,mb=1,recompute=none,zero=1"),
                          "= 96, but the job has 64 GPUs")
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--layout", "tq=2"),
                          "unknown key 'tq'", "tp")
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--layout", "tp=two"),
                          "tp='two'")


def test_model_that_fits_nowhere_says_what_is_needed():
    proc = run("plan", "train", "--gpu", "H100:8", "--nodes", "1", "--model", "llama3.1-405b")
    assert_one_line_error(proc, "fits on no layout", "would fit")


def test_bad_model_tokens_and_precision():
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama-9"), "unknown")
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--tokens", "lots"),
                          "--tokens")
    assert_one_line_error(run("plan", "train", "--gpu", "A100:8", "--model", "llama2-7b", "--precision", "fp8"),
                          "fp8")
    assert_one_line_error(run("plan", "train", "--model", "llama2-7b"), "--cluster")
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--seq-len", "0"),
                          "--seq-len")
    assert_one_line_error(run("plan", "train", "--gpu", "H100:8", "--model", "llama2-7b", "--global-batch", "0"),
                          "--global-batch")


def test_presets_default_to_their_published_batch():
    ds = json.loads(run("plan", "train", "--gpu", "H100:8", "--nodes", "256", "--model", "deepseek-v3",
                        "--tokens", "1T", "--precision", "fp8", "--top", "1", "--json", check_rc=0).stdout)
    assert ds["global_batch"] == 15360 and ds["seq_len"] == 4096
    llama = json.loads(run("plan", "train", "--gpu", "H100:8", "--nodes", "2", "--model", "llama3-8b",
                           "--tokens", "1T", "--top", "1", "--json", check_rc=0).stdout)
    assert llama["global_batch"] == 512   # no published batch: ~4M tokens of 8192
