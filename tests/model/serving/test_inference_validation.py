"""The inference kind of `gpucluster validate`: published cases and unseen shapes."""

import statistics
import textwrap

from gpucluster.validate.runner import run_file, summarize


def test_public_inference_cases_meet_the_target(shared_dir):
    rows = [r for r in run_file(shared_dir / "validation" / "inference-public.yaml") if r.kind == "inference"]
    assert rows and all(r.error is not None for r in rows)
    assert statistics.median(abs(r.error) for r in rows if r.error is not None) <= 0.15


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
