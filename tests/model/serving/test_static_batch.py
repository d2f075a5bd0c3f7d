"""A static batch larger than the KV cache (model/serving/static_batch.py): the engine's admission
rule (engines.yaml `kv_admission`) decides what it does, and a batch never runs as if the cache
held it."""

import pytest

from gpucluster.catalog.serving import get_engine
from gpucluster.model.serving.kv_cache import Quant, replica_memory
from gpucluster.model.serving.static_batch import DoesNotFit, predict_batch, static_batch
from gpucluster.model.serving.step_time import Replica
from gpucluster.specs.validation_case import Case
from gpucluster.validate.inference_predictor import defaults_taken, predict_inference
from gpucluster.validate.predictors import Unsupported

IN, OUT = 512, 2048


def _case(model: dict, batch: int) -> Case:
    """A static-batch case of a Llama-3-shaped model on one H100 (TP1, bf16)."""
    return Case.model_validate({
        "id": "static", "kind": "inference", "source": "test",
        "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 1, "gpus_per_node": 8},
        "model": model | {"gated_mlp": True, "vocab": 128256, "seq_len": 8192},
        "serving": {"tp": 1, "batch": batch, "input_tokens": IN, "output_tokens": OUT},
        "measured": {"tokens_per_s": 1.0}})


def _setup(fabric, spec, engine):
    rep = Replica(spec, fabric, 1, 1, Quant("bf16", "bf16"), engine)
    mem = replica_memory(spec, rep.gpu, rep.quant, 1, 1, IN + OUT)
    assert mem.max_sequences >= 4, "the test needs a cache that holds a few sequences"
    return rep, mem


def test_a_batch_that_fits_runs_at_once(h100, llama8b):
    rep, mem = _setup(h100, llama8b, "trtllm")
    got = static_batch(rep, mem, mem.max_sequences, IN, OUT)
    assert got["waves"] == 1
    assert got["latency_s"] == predict_batch(rep, mem.max_sequences, IN, OUT)["latency_s"]


def test_a_reserving_engine_runs_waves_of_what_fits(h100, llama8b):
    assert get_engine("trtllm").kv_admission == "reserve"
    rep, mem = _setup(h100, llama8b, "trtllm")
    fit = mem.max_sequences
    one = predict_batch(rep, fit, IN, OUT)
    got = static_batch(rep, mem, 2 * fit + 3, IN, OUT)
    assert got["waves"] == 3
    assert got["latency_s"] == pytest.approx(2 * one["latency_s"] + predict_batch(rep, 3, IN, OUT)["latency_s"])
    assert got["ttft_s"] == pytest.approx(one["ttft_s"])


def test_an_on_demand_engine_preempts_and_recomputes(h100, llama8b):
    """vLLM: all start, the newest are preempted when the cache is full and finish afterwards. It
    costs more than a cache that held them all, and less than waiting for a whole earlier wave."""
    assert get_engine("vllm").kv_admission == "on_demand"
    rep, mem = _setup(h100, llama8b, "vllm")
    fit, batch = mem.max_sequences, mem.max_sequences + max(2, mem.max_sequences // 8)
    got = static_batch(rep, mem, batch, IN, OUT)
    pretend = predict_batch(rep, batch, IN, OUT)["latency_s"]
    waves = predict_batch(rep, fit, IN, OUT)["latency_s"] + predict_batch(rep, batch - fit, IN, OUT)["latency_s"]
    assert got["waves"] == 2
    assert pretend < got["latency_s"] < waves


def test_not_one_sequence_fits_is_a_reason_not_a_number(h100, llama70b):
    rep = Replica(llama70b, h100, 1, 1, Quant("bf16", "bf16"), "trtllm")   # 141 GB of weights on one 80 GB GPU
    mem = replica_memory(llama70b, rep.gpu, rep.quant, 1, 1, IN + OUT)
    with pytest.raises(DoesNotFit, match="GiB"):
        static_batch(rep, mem, 1, IN, OUT)
    case = _case({"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672}, batch=1)
    with pytest.raises(Unsupported, match="KV"):
        predict_inference(case)


def test_validate_says_when_a_batch_ran_in_waves():
    case = _case({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336}, batch=4096)
    pred = predict_inference(case)
    notes = defaults_taken(case, pred)
    assert pred["_waves"] > 1
    assert notes[0].startswith("engine: trtllm") and "waves" in notes[1] and "4096" in notes[1]


def test_a_bad_admission_rule_is_one_line(registry_error):
    msg = registry_error(kv_admission="first_come")
    assert "\n" not in msg and "kv_admission" in msg and "reserve" in msg
