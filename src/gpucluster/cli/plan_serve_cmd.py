"""`gpucluster plan serve`: replicas, GPUs, latency and cost to serve a model at a request rate.

No `from __future__ import annotations` here: typer reads the options from the signature, and
string annotations would be compiled and evaluated twice at every start."""

from typing import Annotated, Optional

import typer


def serve(
    model: Annotated[str, typer.Option(help="A preset (see `gpucluster models`) or a model YAML file")],
    rate: Annotated[str, typer.Option(help="Requests per second to serve, e.g. 1000 or 50k")],
    gpu: Annotated[Optional[str], typer.Option(help="GPU type and count per node, e.g. H100:8")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster spec YAML (instead of --gpu)")] = None,
    pool: Annotated[Optional[str], typer.Option(help="Node pool of the cluster (default: the first)")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Nodes available (default: as many as needed)")] = None,
    nic: Annotated[str, typer.Option(help="With --gpu: NIC, for pipeline stages across nodes")] = "NDR400",
    input_tokens: Annotated[int, typer.Option("--input", help="Prompt tokens per request (mean)")] = 512,
    output_tokens: Annotated[int, typer.Option("--output", help="Output tokens per request (mean)")] = 256,
    lengths: Annotated[str, typer.Option(help="Length distribution: fixed, uniform (mean +-50%) or exponential")] = "fixed",
    slo_ttft: Annotated[Optional[str], typer.Option(help="p99 time to first token, e.g. 500ms")] = None,
    slo_tpot: Annotated[Optional[str], typer.Option(help="p99 time per output token, e.g. 50ms")] = None,
    precision: Annotated[str, typer.Option(help="Weights: bf16, fp16, fp8, int8, int4 or fp4")] = "bf16",
    kv_precision: Annotated[Optional[str], typer.Option(
        help="KV cache: bf16, fp16, fp8 or int8 (default: as the weights, else bf16)")] = None,
    max_batch: Annotated[int, typer.Option(help="Most concurrent sequences per replica (the engine's max_num_seqs)")] = 512,
    compare: Annotated[Optional[str], typer.Option(help="Also try these GPU types (comma-separated, or 'all')")] = None,
    cpu: Annotated[Optional[str], typer.Option(help="Also try CPU nodes, e.g. EPYC-9654:2 (type:sockets per node)")] = None,
    engine: Annotated[Optional[str], typer.Option(
        help="Serving engine: vllm, sglang, trtllm, nim, tgi, lmdeploy or gpt-fast (default: trtllm, see docs/serving.md)")] = None,
    simulate: Annotated[bool, typer.Option(help="Check the recommended replica with a discrete-event run")] = False,
    top: Annotated[int, typer.Option(help="How many alternatives to show")] = 8,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Recommend a deployment (GPU type, TP x PP per replica, batch, replicas) for a request rate within SLOs."""
    _import_numpy_without_blas_threads()
    from gpucluster.cli.plan_serve_render import render, to_json
    from gpucluster.errors import UserError
    from gpucluster.plan.serve_request import plan_serve

    if top < 1:
        raise UserError(f"must be >= 1, got {top}", field="--top")
    plan = plan_serve(model, rate, gpu=gpu, cluster=cluster, pool=pool, nodes=nodes, nic=nic,
                      input_tokens=input_tokens, output_tokens=output_tokens, lengths=lengths, slo_ttft=slo_ttft,
                      slo_tpot=slo_tpot, precision=precision, kv_precision=kv_precision, max_batch=max_batch,
                      compare=compare, cpu=cpu, simulate=simulate, engine=engine)
    if json_out:
        to_json(plan.search, plan.request, plan.simulation, spec=plan.spec)
    else:
        render(plan.search, plan.request, plan.simulation, top, spec=plan.spec)
    if html:
        from gpucluster.report.plan_report import write_serve_report
        write_serve_report(plan.search, plan.request, plan.simulation, html, spec=plan.spec, fabrics=plan.fabrics,
                           traffic=plan.traffic, quant=plan.quant)


def _import_numpy_without_blas_threads() -> None:
    """numpy's OpenBLAS starts a thread per core as it loads, and they spin for a while: 0.05-0.1 s
    of CPU on 2 cores, more on more. This command makes no BLAS call (its step-time tables are
    element-wise, the TTFT convolution is pocketfft), so numpy is loaded with one. OpenBLAS reads
    the variable only as it loads: the environment is restored at once, for what runs after (an
    in-process caller, a child process). A value the user set is kept; so is a numpy already loaded."""
    import os

    ours = "OPENBLAS_NUM_THREADS" not in os.environ
    if ours:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if ours:
            del os.environ["OPENBLAS_NUM_THREADS"]
