"""TransformerSpec: defaults of the validation format, clear errors, presets with sources."""

import pytest
import yaml
from pydantic import ValidationError

from gpucluster.errors import UserError
from gpucluster.specs.workload import TransformerSpec, load_model_spec, model_presets

GPT = {"layers": 96, "hidden": 12288, "heads": 96, "vocab": 51200, "seq_len": 2048}


def test_defaults_follow_the_validation_format():
    s = TransformerSpec(**GPT)
    assert (s.kv_heads, s.ffn_hidden, s.gated_mlp, s.experts, s.experts_per_token) == (96, 4 * 12288, False, 1, 1)
    assert (s.moe_ffn_hidden, s.shared_experts, s.dense_layers, s.tied_embeddings) == (4 * 12288, 0, 0, False)
    assert s.head_dim == 128 and s.attention == "mha" and not s.is_moe and s.moe_layers == 0
    # GPT-style extras by default, Llama-style when gated
    assert (s.bias, s.norm, s.position_embedding, s.activation) == (True, "layernorm", "learned", "gelu")
    g = TransformerSpec(**GPT, gated_mlp=True)
    assert (g.bias, g.norm, g.position_embedding, g.activation) == (False, "rmsnorm", "rope", "swiglu")


def test_moe_defaults_and_explicit_head_dim():
    s = TransformerSpec(**GPT, ffn_hidden=1000, experts=8, experts_per_token=2, dense_layers=2)
    assert s.moe_ffn_hidden == 1000 and s.is_moe and s.moe_layers == 94
    gemma = TransformerSpec(layers=28, hidden=3072, heads=16, kv_heads=16, head_dim=256, vocab=256000, seq_len=8192)
    assert gemma.head_dim == 256 and gemma.qk_head_dim == gemma.v_dim == 256


def test_dump_loads_back_equal():
    for _, preset in model_presets().items():
        spec = preset.model
        assert TransformerSpec.model_validate(spec.model_dump()) == spec
        assert TransformerSpec.model_validate_json(spec.model_dump_json()) == spec
    s = load_model_spec("llama3-8b").with_(seq_len=4096)
    assert s.seq_len == 4096 and s.kv_heads == 8


@pytest.mark.parametrize("bad, field, words", [
    ({"heads": 64, "kv_heads": 6}, "kv_heads", "multiple of kv_heads"),
    ({"layers": -2}, "layers", "greater than 0"),
    ({"hidden": 0}, "hidden", "greater than 0"),
    ({"experts": 8, "experts_per_token": 9}, "experts_per_token", "cannot exceed experts"),
    ({"dense_layers": 97}, "dense_layers", "cannot exceed layers"),
    ({"hidden": 1000, "heads": 3}, "head_dim", "give head_dim"),
    ({"attention": "mla"}, "kv_lora_rank", "required when attention is mla"),
    ({"kv_lora_rank": 512}, "kv_lora_rank", "only applies to attention: mla"),
    ({"gated_mlp": True, "activation": "gelu"}, "activation", "gated_mlp: false"),
    ({"attention": "gqa"}, "attention", "'mha' or 'mla'"),
    ({"colour": "red"}, "colour", "unknown field"),
])
def test_bad_specs_name_the_field(tmp_path, bad, field, words):
    p = tmp_path / "model.yaml"
    p.write_text(yaml.safe_dump({**GPT, **bad}, sort_keys=False))
    with pytest.raises(UserError) as exc:
        load_model_spec(p)
    assert exc.value.field == field and words in exc.value.reason
    assert exc.value.file == str(p) and exc.value.line is not None
    with pytest.raises(ValidationError):
        TransformerSpec(**{**GPT, **bad})


def test_error_points_at_the_line_under_a_model_key(tmp_path):
    p = tmp_path / "case.yaml"
    p.write_text("model:\n  layers: 32\n  hidden: 4096\n  heads: 32\n  kv_heads: 5\n  vocab: 32000\n  seq_len: 4096\n")
    with pytest.raises(UserError) as exc:
        load_model_spec(str(p))
    assert exc.value.message.startswith(f"{p}:5: model.kv_heads: heads (32) must be a multiple of kv_heads (5)")
    p.write_text("model:\n  layers: 32\n  hidden: 4096\n  heads: 32\n  vocab: 32000\n  seq_len: 4096\n")
    assert load_model_spec(str(p)).layers == 32


def test_mla_spec():
    s = load_model_spec("deepseek-v3")
    assert s.attention == "mla" and s.head_dim == s.qk_head_dim == 192 and s.v_dim == 128
    with pytest.raises(ValidationError, match="qk_nope_head_dim \\+ qk_rope_head_dim"):
        s.with_(head_dim=128)
    with pytest.raises(ValidationError, match="one key/value head per query head"):
        s.with_(kv_heads=8)


@pytest.mark.parametrize("alias, name", [
    ("llama3-70b", "Llama-3-70B"), ("llama-3-70b", "Llama-3-70B"), ("LLAMA3-70B", "Llama-3-70B"),
    ("llama3.1-405b", "Llama-3.1-405B"), ("gpt3-175b", "GPT-3-175B"), ("mixtral-8x7b", "Mixtral-8x7B"),
    ("deepseek-v3", "DeepSeek-V3"), ("Llama_2_7B", "Llama-2-7B"), ("megatron-gpt-530b", "megatron-gpt-530b"),
    ("nemotron-4-340b", "Nemotron-4-340B"), ("mpt-7b", "MPT-7B"), ("mpt-30b", "MPT-30B"),
])
def test_presets_by_name_and_alias(alias, name):
    assert load_model_spec(alias).name == name


def test_unknown_preset_lists_valid_names():
    with pytest.raises(UserError) as exc:
        load_model_spec("llama-4-70b")
    msg = exc.value.message
    assert "unknown model preset 'llama-4-70b'" in msg and "did you mean" in msg
    assert "valid:" in msg and "Llama-3-70B" in msg and "DeepSeek-V3" in msg
    with pytest.raises(UserError, match="file not found"):
        load_model_spec("no/such/model.yaml")


def test_every_preset_cites_a_dated_source():
    presets = model_presets()
    assert len(presets) >= 16
    for name, p in presets.items():
        src = p.sources[p.source]
        assert src.title and src.date.year >= 2020 and src.url, name
        assert p.model.name == name


def test_megatron_sizes_match_korthikanti_table():
    # (heads, hidden, layers) of the 22B, 175B, 530B and 1T GPT models, vocab 51200, seq 2048
    for name, (a, h, l) in {"22b": (64, 6144, 48), "175b": (96, 12288, 96), "530b": (128, 20480, 105),
                            "1t": (160, 25600, 128)}.items():
        s = load_model_spec(f"megatron-gpt-{name}")
        assert (s.heads, s.hidden, s.layers, s.vocab, s.seq_len) == (a, h, l, 51200, 2048)


def test_validation_cases_parse(shared_dir):
    data = yaml.safe_load((shared_dir / "validation" / "training-public.yaml").read_text())
    for case in data["cases"]:
        spec = TransformerSpec.model_validate(case["model"])
        assert spec.layers > 0


def test_models_command_lists_and_shows():
    import json

    import typer
    from typer.testing import CliRunner

    from gpucluster.cli import models_cmd
    app = typer.Typer()
    app.command("models")(models_cmd.models)
    app.command("other")(lambda: None)   # keep `models` a subcommand
    run = CliRunner().invoke
    out = run(app, ["models"], env={"COLUMNS": "220"})
    assert out.exit_code == 0 and "DeepSeek-V3" in out.output and "Llama-3.1-405B" in out.output
    out = run(app, ["models", "mixtral-8x7b", "--json"])
    d = json.loads(out.output)
    assert d["name"] == "Mixtral-8x7B" and abs(d["params_active"] / 12.9e9 - 1) < 0.02
    assert d["published_total_params"]["value"] == 46.7e9
    out = run(app, ["models", "gpt3"], env={"COLUMNS": "220"})
    assert out.exit_code == 0 and "174.6" in out.output and "Brown et al. 2020" in out.output
    out = run(app, ["models", "--json"])
    assert len(json.loads(out.output)) == len(model_presets())


def test_absurd_model_sizes_are_refused_before_any_search():
    from pydantic import ValidationError

    from gpucluster.specs.workload import TransformerSpec

    with pytest.raises(ValidationError, match="layers"):
        TransformerSpec(layers=2**31, hidden=1024, heads=8, vocab=1000, seq_len=128)
