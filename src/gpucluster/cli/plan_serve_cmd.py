"""`gpucluster plan serve`: replicas, GPUs, latency and cost to serve a model at a request rate."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.plan_cmd import plan_app

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?\s*$")
_RATE = re.compile(r"^\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)\s*([kKmM]?)\s*(?:/s|rps)?\s*$")


def parse_duration(text: str, field: str) -> float:
    """'500ms', '0.5s', '200us', '50' (milliseconds) -> seconds."""
    from gpucluster.errors import UserError
    m = _DURATION.match(text)
    if not m:
        raise UserError(f"expected a duration such as 500ms, 0.5s or 200us, got {text!r}", field=field)
    value = float(m.group(1)) * {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}[m.group(2)]
    if value <= 0:
        raise UserError(f"must be > 0, got {text!r}", field=field)
    return value


def parse_rate(text: str) -> float:
    """'1000', '50k', '2.5k/s' -> requests per second."""
    from gpucluster.errors import UserError
    m = _RATE.match(text)
    if not m:
        raise UserError(f"expected requests per second such as 1000 or 50k, got {text!r}", field="--rate")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)]
    if not value > 0 or not math.isfinite(value):
        raise UserError(f"must be > 0 requests per second, got {text!r}", field="--rate")
    return value


@plan_app.command("serve")
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
    kv_precision: Annotated[Optional[str], typer.Option(help="KV cache: bf16, fp16, fp8 or int8 (default: as the weights, else bf16)")] = None,
    max_batch: Annotated[int, typer.Option(help="Most concurrent sequences per replica (the engine's max_num_seqs)")] = 512,
    compare: Annotated[Optional[str], typer.Option(help="Also try these GPU types (comma-separated, or 'all')")] = None,
    cpu: Annotated[Optional[str], typer.Option(help="Also try CPU nodes, e.g. EPYC-9654:2 (type:sockets per node)")] = None,
    simulate: Annotated[bool, typer.Option(help="Check the recommended replica with a discrete-event run")] = False,
    top: Annotated[int, typer.Option(help="How many alternatives to show")] = 8,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Recommend a deployment (GPU type, TP x PP per replica, batch, replicas) for a request rate within SLOs."""
    from gpucluster.catalog import catalog, parse_accelerator
    from gpucluster.cli.plan_serve_render import render, to_json
    from gpucluster.errors import UserError
    from gpucluster.model.serving.kv_cache import KV_BYTES, WEIGHT_BYTES, Quant
    from gpucluster.model.serving.queueing import Lengths, Traffic
    from gpucluster.plan.fabric_from import from_flags, from_options
    from gpucluster.plan.serve_search import search
    from gpucluster.specs.workload import load_model_spec

    req_rate = parse_rate(rate)
    for name, v in (("--input", input_tokens), ("--output", output_tokens), ("--max-batch", max_batch),
                    ("--top", top)):
        if v < 1:
            raise UserError(f"must be >= 1, got {v}", field=name)
    if nodes is not None and nodes < 1:
        raise UserError(f"must be >= 1, got {nodes}", field="--nodes")
    if lengths not in ("fixed", "uniform", "exponential"):
        raise UserError(f"must be fixed, uniform or exponential, got {lengths!r}", field="--lengths")
    if precision not in WEIGHT_BYTES:
        raise UserError(f"must be one of {', '.join(WEIGHT_BYTES)}, got {precision!r}", field="--precision")
    kv = kv_precision or (precision if precision in KV_BYTES else "bf16")
    if kv not in KV_BYTES:
        raise UserError(f"must be one of {', '.join(KV_BYTES)}, got {kv!r}", field="--kv-precision")
    ttft = parse_duration(slo_ttft, "--slo-ttft") if slo_ttft else None
    tpot = parse_duration(slo_tpot, "--slo-tpot") if slo_tpot else None
    spec = load_model_spec(model)

    target = from_options(cluster, pool, gpu, nodes, nic, None)
    fabrics = [target.fabric]
    per_node = target.fabric.gpus_per_node
    if compare:
        names = [n for n, g in catalog.gpus.items() if g.prices.rental_usd_per_gpu_hour] \
            if compare.strip() == "all" else [c.strip() for c in compare.split(",") if c.strip()]
        for name in names:
            g, _ = parse_accelerator(name, field="--compare")
            if g.name != target.fabric.gpu_name:
                fabrics.append(from_flags(f"{g.name}:{per_node}", nodes if nodes is not None else 1, nic, None).fabric)
    cpus = []
    if cpu:
        cname, _, sockets = cpu.partition(":")
        if sockets and (not sockets.isdigit() or int(sockets) < 1):
            raise UserError(f"sockets per node must be a positive integer, got {sockets!r}", field="--cpu")
        cpus.append((catalog.cpus.get(cname.strip(), field="--cpu"), int(sockets or 2)))

    traffic = Traffic(req_rate, Lengths(float(input_tokens), lengths), Lengths(float(output_tokens), lengths))  # type: ignore[arg-type]
    quant = Quant(precision, kv)
    max_replica = per_node * (nodes if nodes else 8)
    result = search(spec, fabrics, req_rate, traffic, quant=quant, slo_ttft=ttft, slo_tpot=tpot,
                    max_batch=max_batch, max_gpus_per_replica=max_replica, cpus=cpus)
    if result.best is None:
        raise nothing_fits(spec, result, ttft, tpot, max_replica)
    sim = None
    if simulate:
        from gpucluster.model.serving.batcher_sim import simulate as run_sim
        from gpucluster.model.serving.queueing import StepModel
        from gpucluster.model.serving.step_time import Replica
        best = result.best
        fab = next((f for f in fabrics if f.gpu_name == best.hardware), None)
        if fab is not None:
            step = StepModel(Replica(spec, fab, best.tp, best.pp, quant))
            per = Traffic(req_rate / best.replicas, traffic.input, traffic.output)
            sim = run_sim(step, per, best.max_batch, requests=2000, seed=0)
    meta: dict[str, Any] = {"model": spec.name or model, "rate": req_rate, "input": input_tokens,
                            "output": output_tokens, "lengths": lengths, "slo_ttft_s": ttft, "slo_tpot_s": tpot,
                            "weights": precision, "kv": kv, "target": target.description,
                            "gpus_per_node": per_node, "nodes": nodes}
    if json_out:
        to_json(result, meta, sim)
    else:
        render(result, meta, sim, top)
    if html:
        from gpucluster.report.plan_report import write_serve_report
        write_serve_report(result, meta, sim, html, spec=spec, fabrics=fabrics, traffic=traffic, quant=quant)


def nothing_fits(spec, result, ttft, tpot, max_replica: int):
    """The one-line error when no replica shape works: what binds, and by how much."""
    from gpucluster.errors import UserError
    name = spec.name or "the model"
    slo = [r for r in result.rejected if r.reason in ("TTFT SLO", "TPOT SLO")]
    if slo:
        def ratio(r):
            return r.needed / (ttft if r.reason == "TTFT SLO" else tpot)
        r = min(slo, key=ratio)
        field = "--slo-ttft" if r.reason == "TTFT SLO" else "--slo-tpot"
        limit = ttft if r.reason == "TTFT SLO" else tpot
        return UserError(f"no configuration meets {r.reason.split()[0]} p99 <= {limit * 1e3:g} ms: the fastest "
                         f"({r.hardware} TP{r.tp} x PP{r.pp}) gives {r.needed * 1e3:.1f} ms at light load, "
                         f"{ratio(r):.2f}x over", field=field)
    mem = [r for r in result.rejected if r.reason == "memory"]
    if mem:
        r = min(mem, key=lambda r: r.needed)
        return UserError(f"{name} fits on no replica up to {max_replica} GPUs: the smallest footprint "
                         f"({r.hardware} TP{r.tp} x PP{r.pp}) {r.detail}; try --precision fp8/int4, a GPU with "
                         f"more memory, or more --nodes", field="--model")
    return UserError(f"no replica shape is valid for {name} on these GPUs (heads and layers must divide "
                     f"over TP and PP)", field="--model")
