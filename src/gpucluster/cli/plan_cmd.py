"""`gpucluster plan train`: how long, how laid out, and what limits a training run."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

plan_app = typer.Typer(help="Plan a workload on a cluster: training runs and serving deployments.", no_args_is_help=True)

LAYOUT_KEYS = {"tp": int, "pp": int, "dp": int, "cp": int, "ep": int, "etp": int, "interleave": int, "v": int,
               "micro_batch": int, "mb": int, "sequence_parallel": bool, "sp": bool, "recompute": str, "zero": int,
               "offload_optimizer": bool, "offload": bool, "attention": str, "overlap_dp_comm": bool,
               "overlap_tp_comm": bool, "moe_overlap": str, "moe_dispatcher": str, "moe_fp8_dispatch": bool,
               "moe_imbalance": float, "zero3_prefetch_params": float, "pp_embedding_layer": bool,
               "pp_loss_layer": bool}
FLOAT_RANGE = {"moe_imbalance": (1.0, 64.0), "zero3_prefetch_params": (1.0, 1e15)}
ALIASES = {"v": "interleave", "mb": "micro_batch", "sp": "sequence_parallel", "offload": "offload_optimizer"}


@plan_app.command("train")
def train(
    model: Annotated[str, typer.Option(help="A preset (see `gpucluster models`) or a model YAML file")],
    cluster: Annotated[Optional[str], typer.Option(help="Cluster spec YAML")] = None,
    pool: Annotated[Optional[str], typer.Option(help="Node pool of the cluster (default: the first)")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="Without --cluster: GPU type and count per node, e.g. H100:8")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Nodes to use (default: all of the pool; 1 with --gpu)")] = None,
    nic: Annotated[str, typer.Option(help="Without --cluster: NIC, e.g. NDR400, RoCE-400G, Ethernet-100G")] = "NDR400",
    nics_per_node: Annotated[Optional[int], typer.Option(help="Without --cluster: NICs per node (default: one per GPU)")] = None,
    tokens: Annotated[Optional[str], typer.Option(help="Tokens to train on, e.g. 15T, 300B (default: 20 per parameter)")] = None,
    global_batch: Annotated[Optional[int], typer.Option(help="Sequences per optimizer step (default: ~4M tokens)")] = None,
    seq_len: Annotated[Optional[int], typer.Option(help="Sequence length (default: the model's)")] = None,
    layout: Annotated[Optional[str], typer.Option(help="Fix dimensions, e.g. tp=8,pp=16,recompute=selective,zero=1")] = None,
    precision: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
    top: Annotated[int, typer.Option(help="How many layouts to show")] = 5,
    tp_across_domains: Annotated[bool, typer.Option(help="Allow tensor parallelism across NVLink domains")] = False,
    attention: Annotated[Optional[str], typer.Option(
        help="Attention kernel: flash (FlashAttention/cuDNN fused; default) or unfused (scores in HBM)")] = None,
    dp_overlap: Annotated[Optional[bool], typer.Option(
        "--dp-overlap/--no-dp-overlap", help="Gradient reduction and ZeRO gathers overlap compute (default: on)")] = None,
    tp_overlap: Annotated[Optional[bool], typer.Option(
        "--tp-overlap/--no-tp-overlap", help="TP collectives overlap GEMMs (TE userbuffers; default: off)")] = None,
    moe_overlap: Annotated[Optional[str], typer.Option(
        help="MoE all-to-all overlap: none (default) or dualpipe")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Predict step time, memory, MFU, time and GPU-hours to train, and find the best parallel layout."""
    from gpucluster.cli.plan_render import render_json, render_plan
    from gpucluster.plan.train_request import plan_train

    result = plan_train(model, cluster=cluster, pool=pool, gpu=gpu, nodes=nodes, nic=nic,
                        nics_per_node=nics_per_node, tokens=tokens, global_batch=global_batch, seq_len=seq_len,
                        layout=parse_layout(layout) if layout else None, precision=precision, top=top,
                        tp_across_domains=tp_across_domains, attention=attention, dp_overlap=dp_overlap,
                        tp_overlap=tp_overlap, moe_overlap=moe_overlap)
    meta = result.meta()
    if json_out:
        render_json(result, meta)
    else:
        render_plan(result, meta, top)
    if html:
        from gpucluster.report.plan_report import write_train_report
        write_train_report(result, meta, html, fixed=result.fixed, tp_across_domains=tp_across_domains)


def parse_layout(text: str) -> dict[str, Any]:
    from gpucluster.errors import UserError
    from gpucluster.plan.train_request import CHOICES

    fixed: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise UserError(f"expected key=value, got {part!r} (keys: {', '.join(sorted(LAYOUT_KEYS))})", field="--layout")
        key, value = (x.strip() for x in part.split("=", 1))
        if key not in LAYOUT_KEYS:
            raise UserError(f"unknown key {key!r} (valid: {', '.join(sorted(LAYOUT_KEYS))})", field="--layout")
        kind = LAYOUT_KEYS[key]
        try:
            if kind is bool:
                if value.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError
                parsed: Any = value.lower() in ("true", "1", "yes", "on")
            elif kind is float:
                parsed = float(value)
                low, high = FLOAT_RANGE[key]
                if not low <= parsed <= high:
                    raise ValueError
            elif kind is int:
                parsed = int(value)
                if parsed < (0 if key == "zero" else 1):
                    raise ValueError
            else:
                parsed = value
        except ValueError:
            what = ({int: "positive integer"}.get(kind, kind.__name__) if kind is not float
                    else "number from {:g} to {:g}".format(*FLOAT_RANGE[key]))
            raise UserError(f"{key}={value!r} is not a valid {what}",
                            field="--layout") from None
        fixed[ALIASES.get(key, key)] = parsed
    for key, allowed in CHOICES.items():
        if key in fixed and fixed[key] not in allowed:
            raise UserError(f"{key} must be {', '.join(allowed)}, got {fixed[key]!r}", field="--layout")
    if "zero" in fixed and fixed["zero"] not in (0, 1, 2, 3):
        raise UserError(f"zero must be 0, 1, 2 or 3, got {fixed['zero']}", field="--layout")
    return fixed
from gpucluster.cli import plan_serve_cmd  # noqa: E402,F401  (registers `plan serve`)
