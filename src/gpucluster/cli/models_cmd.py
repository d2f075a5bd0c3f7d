"""`gpucluster models [NAME]`: list the transformer presets, or show one with its parameter
breakdown, training FLOPs per token and source. NAME may also be a YAML file of a spec."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.render import console, num, print_json, safe


def models(
    name: Annotated[Optional[str], typer.Argument(
        help="A preset or alias (llama3-70b, gpt3-175b, deepseek-v3 ...) or a model YAML file")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """List transformer presets (size, shape, MoE, source), or show one."""
    from gpucluster.specs.workload import model_presets

    presets = model_presets()
    if name is None:
        rows = [_summary(p.model, p) for _, p in presets.items()]
        if json_out:
            print_json(rows)
        else:
            console.print(_table(rows))
        return
    from gpucluster.specs.workload import load_model_spec
    preset = presets.get(name) if name in presets else None
    spec = preset.model if preset else load_model_spec(name)
    detail = _detail(spec, preset)
    if json_out:
        print_json(detail)
    else:
        _show(detail)


def _moe_text(spec) -> str:
    if not spec.is_moe:
        return "-"
    text = f"{spec.experts}x{spec.moe_ffn_hidden} top-{spec.experts_per_token}"
    if spec.shared_experts:
        text += f" +{spec.shared_experts} shared"
    if spec.dense_layers:
        text += f", {spec.dense_layers} dense"
    return text


def _summary(spec, preset) -> dict[str, Any]:
    from gpucluster.model.transformer import params
    p = params(spec)
    return {
        "name": spec.name, "aliases": list(preset.aliases) if preset else [],
        "params_total": p.total, "params_active": p.active, "layers": spec.layers, "hidden": spec.hidden,
        "heads": spec.heads, "kv_heads": spec.kv_heads, "attention": spec.attention, "ffn_hidden": spec.ffn_hidden,
        "gated_mlp": spec.gated_mlp, "vocab": spec.vocab, "seq_len": spec.seq_len, "moe": _moe_text(spec),
        "source": preset.sources[preset.source].title if preset else None,
        "source_id": preset.source if preset else None,
    }


def _table(rows: list[dict[str, Any]]):
    from rich.table import Table
    t = Table(title="Transformer presets (parameters counted by gpucluster; B = 1e9)", title_justify="left")
    for col in ("name", "total B", "active B", "layers", "hidden", "heads/kv", "ffn", "vocab", "seq", "MoE",
                "source"):
        t.add_column(col, justify="right" if col not in ("name", "MoE", "source", "heads/kv") else "left")
    for r in rows:
        heads = f"{r['heads']}/{r['kv_heads']}" + (" MLA" if r["attention"] == "mla" else "")
        ffn = f"{r['ffn_hidden']}" + (" gated" if r["gated_mlp"] else "")
        t.add_row(safe(r["name"]), num(r["params_total"] / 1e9, 2), num(r["params_active"] / 1e9, 2), str(r["layers"]),
                  str(r["hidden"]), heads, ffn, str(r["vocab"]), str(r["seq_len"]), safe(r["moe"]), safe(r["source_id"] or "-"))
    return t


def _detail(spec, preset) -> dict[str, Any]:
    from gpucluster.model.transformer import model_flops_per_token, params
    out = _summary(spec, preset)
    out["spec"] = spec.model_dump(mode="json")
    out["params"] = params(spec).as_dict()
    out["train_flops_per_token"] = model_flops_per_token(spec)
    out["train_flops_per_token_causal"] = model_flops_per_token(spec, causal=True)
    if preset:
        out["source"] = preset.sources[preset.source].model_dump(mode="json")
        for key in ("published_total_params", "published_active_params"):
            value = getattr(preset, key)
            out[key] = None if value is None else {"value": value.value, "source": value.source}
        out["notes"] = preset.notes
    return out


def _show(d: dict[str, Any]) -> None:
    from rich.table import Table
    # A model YAML's name and values are the user's: safe().
    console.print(f"[bold]{safe(d['name'] or 'model')}[/bold]" + (f"  (aliases: {safe(', '.join(d['aliases']))})"
                                                                   if d["aliases"] else ""))
    t = Table(show_header=False, box=None)
    t.add_column(justify="left")
    t.add_column(justify="right")
    for k, v in d["spec"].items():
        if k != "name" and v is not None:
            t.add_row(safe(k), safe(v))
    console.print(t)
    p = d["params"]
    pt = Table(title="Parameters (B = 1e9)", title_justify="left")
    pt.add_column("part")
    pt.add_column("per layer", justify="right")
    pt.add_column("layers", justify="right")
    pt.add_column("total B", justify="right")
    pt.add_row("embedding", "-", "-", num(p["embedding"] / 1e9, 3))
    pt.add_row("attention", f"{p['attention']:,}", str(p["dense_layers"] + p["moe_layers"]),
               num(p["attention"] * (p["dense_layers"] + p["moe_layers"]) / 1e9, 3))
    if p["dense_layers"]:
        pt.add_row("dense MLP", f"{p['mlp_dense']:,}", str(p["dense_layers"]),
                   num(p["mlp_dense"] * p["dense_layers"] / 1e9, 3))
    if p["moe_layers"]:
        pt.add_row("MoE MLP (all experts)", f"{p['mlp_moe']:,}", str(p["moe_layers"]),
                   num(p["mlp_moe"] * p["moe_layers"] / 1e9, 3))
        pt.add_row("  one expert", f"{p['expert']:,}", "-", "-")
        pt.add_row("  router", f"{p['router']:,}", "-", "-")
    pt.add_row("final norm + logits", "-", "-", num((p["final_norm"] + p["logits"]) / 1e9, 3))
    pt.add_row("[bold]total[/bold]", "", "", num(p["total"] / 1e9, 3))
    pt.add_row("[bold]active per token[/bold]", "", "", num(p["active"] / 1e9, 3))
    console.print(pt)
    for key, label in (("published_total_params", "published total"), ("published_active_params",
                                                                        "published active")):
        if d.get(key):
            console.print(f"{label}: {num(d[key]['value'] / 1e9, 2)} B ({safe(d[key]['source'])})")
    console.print(f"training FLOPs per token at seq {d['seq_len']}: {d['train_flops_per_token']:.4g} "
                  f"(Megatron count, full attention; causal {d['train_flops_per_token_causal']:.4g})")
    src = d.get("source")
    if isinstance(src, dict):
        console.print(safe(f"source: {src['title']} ({src['date']})" + (f" {src['url']}" if src.get("url") else "")))
    if d.get("notes"):
        console.print(f"notes: {safe(d['notes'])}")
