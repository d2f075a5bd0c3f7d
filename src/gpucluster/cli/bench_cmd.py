"""`gpucluster bench`: measure collectives, GEMM, HBM and storage on the machine it runs on."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpucluster.cli.render import print_json

bench_app = typer.Typer(help="Benchmarks: collectives (nccl-tests table), GEMM, HBM, storage.", no_args_is_help=True)
Json = Annotated[bool, typer.Option("--json", help="Print JSON")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Also write the JSON result to this file")]
Metrics = Annotated[Optional[str], typer.Option(help="Also write OpenMetrics text (node-exporter textfile) here")]


@bench_app.command("collective")
def collective(
    op: Annotated[str, typer.Option(help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast")] = "all_reduce",
    min_size: Annotated[str, typer.Option("--min", "-b", help="Smallest size (nccl-tests -b)")] = "8",
    max_size: Annotated[str, typer.Option("--max", "-e", help="Largest size (nccl-tests -e)")] = "64M",
    factor: Annotated[int, typer.Option("--step-factor", "-f", help="Size multiplier (nccl-tests -f)")] = 2,
    datatype: Annotated[str, typer.Option("--datatype", "-d", help="float, double, half, bfloat16, int32")] = "float",
    backend: Annotated[Optional[str], typer.Option(help="gloo or nccl (default: nccl with GPUs, else gloo)")] = None,
    iters: Annotated[int, typer.Option(help="Timed iterations per size (nccl-tests -n)")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed iterations first (nccl-tests -w)")] = 5,
    check: Annotated[bool, typer.Option(help="Check every result (#wrong)")] = True,
    local: Annotated[Optional[int], typer.Option(help="Start N ranks on this machine (else: torchrun/srun env)")] = None,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds")] = 600,
    json_out: Json = False, out: Out = None, metrics: Metrics = None,
) -> None:
    """Run a collective over every size like nccl-tests, check every result, print its table.
    Exit 1 when any value is wrong."""
    import json

    from gpucluster.bench.collective import DTYPES, OPS, BenchConfig
    from gpucluster.bench.deps import require_torch
    from gpucluster.errors import UserError
    from gpucluster.units import parse_bytes, size_sweep

    if op not in OPS:
        raise UserError(f"unknown collective {op!r} (valid: {', '.join(OPS)})", field="--op")
    if datatype not in DTYPES:
        raise UserError(f"unknown datatype {datatype!r} (valid: {', '.join(DTYPES)})", field="--datatype")
    if iters < 1 or warmup < 0:
        raise UserError("--iters must be >= 1 and --warmup >= 0", field="--iters")
    try:
        sizes = size_sweep(parse_bytes(min_size), parse_bytes(max_size), factor)
    except ValueError as exc:
        raise UserError(str(exc), field="--min/--max/--step-factor") from None
    torch = require_torch()
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend not in ("gloo", "nccl"):
        raise UserError(f"must be gloo or nccl, got {backend!r}", field="--backend")
    if backend == "nccl" and not torch.cuda.is_available():
        raise UserError("NCCL needs GPUs and this machine has none; use --backend gloo", field="--backend")
    import os
    corrupt = os.environ.get("GPUCLUSTER_BENCH_CORRUPT_RANK")  # test hook: a rank reports a wrong value
    cfg = BenchConfig(op, tuple(sizes), datatype, iters, warmup, backend, check,
                      int(corrupt) if corrupt not in (None, "") else None)
    result = _run(cfg, local, timeout)
    if result is None:
        return  # a rank other than 0: rank 0 reports
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
    if metrics:
        from gpucluster.engines.openmetrics import collective_families, write_textfile
        write_textfile(metrics, collective_families(result))
    if json_out:
        print_json(result)
    else:
        from gpucluster.cli.nccl_table import print_nccl_table
        print_nccl_table([f"gpucluster bench collective: measured {op}_perf ({backend}, {result['launcher']})",
                          f"{result['world_size']} ranks on {result['nodes']} node(s); torch {result['torch']}; "
                          f"{iters} iterations after {warmup} warmup"], result["rows"], result["avg_busbw_gbps"])
    if result["wrong_total"]:
        typer.echo(f"error: {result['wrong_total']} wrong values", err=True)
        raise typer.Exit(1)


def _run(cfg, local: int | None, timeout: float):
    from gpucluster.bench.launcher import launch_local
    from gpucluster.bench.rankenv import detect
    from gpucluster.bench.worker import run_rank
    from gpucluster.errors import UserError

    if local is not None:
        return launch_local(cfg, local, timeout_s=timeout)
    env = detect()
    if env is None:
        raise UserError("give --local N, or run under torchrun or srun (RANK/WORLD_SIZE or SLURM_PROCID)")
    return run_rank(cfg, env, timeout)
