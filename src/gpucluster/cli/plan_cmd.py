"""`gpucluster plan train`: how long, how laid out, and what limits a training run.

No `from __future__ import annotations` here: typer reads the options from the signature, and
string annotations would be compiled and evaluated twice at every start (about 4 ms)."""

from typing import Annotated, Optional

import typer

from gpucluster.model.training.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS

# Written out rather than read from model/training/attention.py (importing it loads the catalog,
# ~0.1 s at every start); tests/cli check that it names every kernel of the registry.
ATTENTION_HELP = ("Attention kernel: flash (the framework's fused kernel; default), unfused (scores in HBM), or a "
                  "kernel: flash2, flash3, cudnn, fa4, cutlass_fmha_sm100, triton, flashmla (aliases fa2, fa3, "
                  "sdpa, te)")


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
    layout: Annotated[Optional[str], typer.Option(
        help="Fix dimensions, e.g. tp=8,pp=16,recompute=selective,zero=1; an explicit pipeline as "
             "pipeline_layout=Et*3|(tt|)*29|m|L (Megatron-Core) or pipeline_layout=3|2|...|2 (layers per stage)")] = None,
    precision: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
    top: Annotated[int, typer.Option(help="How many layouts to show")] = 5,
    tp_across_domains: Annotated[bool, typer.Option(help="Allow tensor parallelism across NVLink domains")] = False,
    attention: Annotated[Optional[str], typer.Option(
        help=ATTENTION_HELP)] = None,
    framework: Annotated[Optional[str], typer.Option(
        help=f"Training stack: {', '.join(f'{n} (default)' if n == DEFAULT_FRAMEWORK else n for n in FRAMEWORKS)} "
             "(docs/training.md: what each fuses, overlaps and shards)")] = None,
    shard_group: Annotated[Optional[int], typer.Option(
        help="HSDP: GPUs one ZeRO-3 shard group spans, replicated across groups (default: all data-parallel GPUs)")] = None,
    dp_overlap: Annotated[Optional[bool], typer.Option(
        "--dp-overlap/--no-dp-overlap", help="Gradient reduction and ZeRO gathers overlap compute (default: on)")] = None,
    tp_overlap: Annotated[Optional[bool], typer.Option(
        "--tp-overlap/--no-tp-overlap", help="TP collectives overlap GEMMs (TE userbuffers; default: off)")] = None,
    moe_overlap: Annotated[Optional[str], typer.Option(
        help="MoE all-to-all overlap: none (default) or dualpipe")] = None,
    failure_profile: Annotated[str, typer.Option(
        help="Failure data for the time with failures: llama3 (default), opt-175b, bloom-176b or seed "
             "(`gpucluster reliability`)")] = "llama3",
    checkpoint_write_gbps: Annotated[Optional[float], typer.Option(
        help="GB/s checkpoints are written at, aggregate (default: the --cluster file's storage tiers, "
             "else 10, an assumption)")] = None,
    restart_s: Annotated[Optional[float], typer.Option(
        help="Seconds to detect a failure, reschedule and relaunch, before reading the checkpoint "
             "(default 600, the catalog's estimate)")] = None,
    checkpoint_interval: Annotated[Optional[str], typer.Option(
        help="Checkpoint this often (30m, 2h, 1800) instead of Daly's optimum")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Predict step time, memory, MFU, time and GPU-hours to train, and find the best parallel layout."""
    from gpucluster.cli.plan_render import render_json, render_plan
    # --layout's parser lives with the request it builds (gpucluster.plan_train takes the text too).
    from gpucluster.plan.train_request import parse_layout, plan_train

    result = plan_train(model, cluster=cluster, pool=pool, gpu=gpu, nodes=nodes, nic=nic,
                        nics_per_node=nics_per_node, tokens=tokens, global_batch=global_batch, seq_len=seq_len,
                        layout=parse_layout(layout) if layout else None, precision=precision, top=top,
                        tp_across_domains=tp_across_domains, attention=attention, dp_overlap=dp_overlap,
                        tp_overlap=tp_overlap, moe_overlap=moe_overlap, framework=framework,
                        shard_group=shard_group, failure_profile=failure_profile,
                        checkpoint_write_gbps=checkpoint_write_gbps, restart_s=restart_s,
                        checkpoint_interval=checkpoint_interval)
    meta = result.meta()
    if json_out:
        render_json(result, meta)
    else:
        render_plan(result, meta, top)
    if html:
        from gpucluster.report.plan_report import write_train_report
        write_train_report(result, meta, html, fixed=result.fixed, tp_across_domains=tp_across_domains)

