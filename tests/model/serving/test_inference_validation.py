"""The inference kind of `gpucluster validate`: published cases and unseen shapes."""

import pytest
import statistics
import textwrap

from gpucluster.validate.runner import run_file, summarize


def test_public_inference_cases_meet_the_target(shared_dir):
    """Both public serving files, every case predicted; the median over all of them within 10%
    (benchmarks/inference_accuracy.py prints it per source, with leave-one-source-out)."""
    rows = [r for f in ("inference-public.yaml", "inference-serving-public.yaml")
            for r in run_file(shared_dir / "validation" / f) if r.kind == "inference"]
    assert len(rows) >= 40 and all(r.error is not None for r in rows)
    assert statistics.median(abs(r.error) for r in rows if r.error is not None) <= 0.10


def test_cases_take_the_engine_they_state_and_refuse_unknown_ones(tmp_path):
    body = """
          - id: {id}
            kind: inference
            hardware: {{gpu: H100-SXM5-80GB, gpus: 8, gpus_per_node: 8}}
            model: {{layers: 80, hidden: 8192, heads: 64, kv_heads: 8, ffn_hidden: 28672, gated_mlp: true, vocab: 128256, seq_len: 8192}}
            serving: {{tp: 8, batch: 8, input_tokens: 128, output_tokens: 128, precision: fp8, {engine}}}
            measured: {{tokens_per_s: 500}}
    """
    p = tmp_path / "cases.yaml"
    p.write_text("schema: gpucluster-validation/v1\ncases:" + "".join(
        textwrap.dedent(body).replace("\n", "\n  ").format(id=i, engine=e)
        for i, e in (("none", ""), ("vllm", "engine: vllm"), ("lmdeploy", "engine: lmdeploy"),
                     ("bad", "engine: fastllm"), ("v0", "engine: vllm, engine_version: '0.6.6'"),
                     ("badv", "engine: vllm, engine_version: latest"))))
    # A bad field is bad input (one line, exit 2; issue 23), not a case the model cannot predict.
    from gpucluster.errors import UserError
    with pytest.raises(UserError, match="unknown engine 'fastllm'; valid: vllm"):
        run_file(p)
    p.write_text(p.read_text().replace("engine: fastllm", "engine: vllm"))
    rows = {r.id: r for r in run_file(p)}
    got = {k: r.predicted for k, r in rows.items() if r.predicted is not None}
    # without CUDA graphs (LMDeploy) the decode steps pay the kernel launches
    assert got["lmdeploy"] < got["vllm"]
    assert got["none"] and got["none"] != got["vllm"]
    # vLLM before 0.8 (V0): more host time per step, fewer tokens per second
    assert got["v0"] < got["vllm"]
    assert rows["badv"].predicted is None and "engine_version" in (rows["badv"].reason or "")


def test_steady_state_concurrency_and_rate_cases(tmp_path):
    """`concurrency` / `request_rate` cases go through the continuous-batching model: throughput
    rises with concurrency, and so does TTFT; a static batch stays a static batch."""
    p = tmp_path / "cases.yaml"
    case = """
          - id: {id}
            kind: inference
            hardware: {{gpu: H100-SXM5-80GB, gpus: 8, gpus_per_node: 8}}
            model: {{layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, gated_mlp: true, vocab: 128256, seq_len: 8192}}
            serving: {{tp: 1, {mode}, input_tokens: 1024, output_tokens: 256, precision: bf16, engine: vllm}}
            measured: {{{metric}: 1.0}}
    """
    modes = (("c8", "concurrency: 8", "output_tokens_per_s"), ("c64", "concurrency: 64", "output_tokens_per_s"),
             ("c64t", "concurrency: 64", "ttft_p50_s"), ("c8t", "concurrency: 8", "ttft_p50_s"),
             ("r", "request_rate: 40", "output_tokens_per_s"), ("both", "batch: 8, concurrency: 8", "tpot_p50_s"))
    p.write_text("schema: gpucluster-validation/v1\ncases:" + "".join(
        textwrap.dedent(case).replace("\n", "\n  ").format(id=i, mode=m, metric=k) for i, m, k in modes))
    from gpucluster.errors import UserError
    with pytest.raises(UserError, match="exactly one of batch"):
        run_file(p)
    p.write_text(p.read_text().replace("batch: 8, concurrency: 8", "concurrency: 8"))
    rows = {r.id: r for r in run_file(p)}
    got = {k: r.predicted for k, r in rows.items() if r.predicted is not None}
    assert got["c64"] > 2 * got["c8"]
    assert got["c64t"] > got["c8t"] > 0
    # 40 requests/s over 8 single-GPU replicas: 256 tokens each, all served
    assert got["r"] == __import__("pytest").approx(40 * 256, rel=0.01)


def test_unseen_cases_predict_or_explain(tmp_path):
    p = tmp_path / "cases.yaml"
    p.write_text(textwrap.dedent("""
        schema: gpucluster-validation/v1
        cases:
          - id: a100-8b-bs32
            kind: inference
            hardware: {gpu: A100-SXM4-80GB, gpus: 1, gpus_per_node: 8}
            model: {layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, gated_mlp: true, vocab: 128256, seq_len: 8192}
            serving: {tp: 1, batch: 32, input_tokens: 512, output_tokens: 128, precision: bf16}
            measured: {tokens_per_s: 1500}
          - id: h200-two-replicas
            kind: inference
            hardware: {gpu: H200-SXM-141GB, gpus: 8, gpus_per_node: 8}
            model: {layers: 80, hidden: 8192, heads: 64, kv_heads: 8, ffn_hidden: 28672, gated_mlp: true, vocab: 128256, seq_len: 8192}
            serving: {tp: 4, batch: 64, input_tokens: 128, output_tokens: 128, precision: fp8, kv_precision: fp8}
            measured: {tokens_per_s: 3000}
          - id: bad-tp
            kind: inference
            hardware: {gpu: H100, gpus: 8, gpus_per_node: 8}
            model: {layers: 32, hidden: 4096, heads: 32, vocab: 32000, seq_len: 4096}
            serving: {tp: 3, batch: 1, input_tokens: 1, output_tokens: 1}
            measured: {tokens_per_s: 10}
    """))
    rows = {r.id: r for r in run_file(p)}
    assert (rows["a100-8b-bs32"].predicted or 0) > 0
    assert (rows["h200-two-replicas"].predicted or 0) > 0
    assert rows["bad-tp"].predicted is None and "does not divide" in (rows["bad-tp"].reason or "")
    assert summarize(list(rows.values()))["inference"]["predicted"] == 2
