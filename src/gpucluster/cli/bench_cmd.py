"""`gpucluster bench`: measure collectives, GEMM, HBM and storage on the machine it runs on."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from gpucluster.cli.render import plain, print_json

bench_app = typer.Typer(help="Benchmarks: collectives (nccl-tests table), GEMM, HBM, storage.", no_args_is_help=True)
Json = Annotated[bool, typer.Option("--json", help="Print JSON")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Also write the JSON result to this file")]
Metrics = Annotated[Optional[str], typer.Option(help="Also write OpenMetrics text (node-exporter textfile) here")]
MAX_STORAGE_BYTES = 1 << 40      # bench storage --size: 1 TiB, far above a checkpoint shard
MAX_BLOCK_BYTES = 1 << 30        # --block: held in memory
MAX_ITERS = 1_000_000


def _outputs(**paths: str | None) -> None:
    """Every output path checked before a benchmark runs (a run must not end in a failed write)."""
    from gpucluster.output_file import check_output_path

    for flag, path in paths.items():
        if path:
            check_output_path(path, "--" + flag)


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
    baseline: Annotated[bool, typer.Option(help="gloo across nodes: also measure this host over loopback in the "
                                                "same run (diagnose compares against it)")] = True,
    local: Annotated[Optional[int], typer.Option(help="Start N ranks on this machine (else: torchrun/srun env); at "
                                                      "most its cores")] = None,
    oversubscribe: Annotated[bool, typer.Option("--oversubscribe", help="With --local: allow more ranks than cores "
                                                "(up to 4 per core, at least 8), e.g. odd rank counts on a laptop; "
                                                "timings then measure time-sharing")] = False,
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
    from gpucluster.api_args import count_option, seconds_option

    count_option(iters, "--iters", 1, MAX_ITERS)
    count_option(warmup, "--warmup", 0, MAX_ITERS)
    seconds_option(timeout, "--timeout")
    if local is not None:   # one process per rank on this machine: past its cores only thrashes (--local 1e6
        # forked until the machine stopped) and the timings measure the scheduler, so more ranks than cores
        # is an explicit --oversubscribe (still bounded), never a silent default
        cores = _cores()
        high = max(8, 4 * cores) if oversubscribe else cores
        if not oversubscribe and cores < local <= max(8, 4 * cores):
            raise UserError(f"must be 1..{cores} (this machine's cores), got {local}; --oversubscribe allows up to "
                            f"{max(8, 4 * cores)}", field="--local")
        count_option(local, "--local", 1, high)
    try:
        sizes = size_sweep(parse_bytes(min_size), parse_bytes(max_size), factor)
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc)[:200], field="--min/--max/--step-factor") from None
    if sizes[-1] > MAX_BLOCK_BYTES * 16:
        raise UserError(f"at most {MAX_BLOCK_BYTES * 16 >> 30} GiB per buffer", field="--max")
    _outputs(out=out, metrics=metrics)
    torch = require_torch()
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend not in ("gloo", "nccl"):
        raise UserError(f"must be gloo or nccl, got {backend!r}", field="--backend")
    if backend == "nccl" and not torch.cuda.is_available():
        raise UserError("NCCL needs GPUs and this machine has none; use --backend gloo", field="--backend")
    corrupt = os.environ.get("GPUCLUSTER_BENCH_CORRUPT_RANK", "")  # test hook: a rank reports a wrong value
    if corrupt and not (corrupt.isascii() and corrupt.isdigit() and len(corrupt) <= 6):
        raise UserError(f"must be a rank number, got {corrupt[:40]!r}", field="GPUCLUSTER_BENCH_CORRUPT_RANK")
    cfg = BenchConfig(op, tuple(sizes), datatype, iters, warmup, backend, check,
                      int(corrupt) if corrupt else None, measure_baseline=baseline)
    result = _run(cfg, local, timeout)
    if result is None:
        return  # a rank other than 0: rank 0 reports
    if out:
        from gpucluster.output_file import write_output
        write_output(out, json.dumps(result, indent=2), field="--out")
    if metrics:
        from gpucluster.engines.openmetrics import collective_families, write_textfile
        write_textfile(metrics, collective_families(result))
    if json_out:
        print_json(result)
    else:
        from gpucluster.cli.nccl_table import print_nccl_table
        print_nccl_table([f"gpucluster bench collective: measured {op}_perf ({backend}, {result['launcher']})",
                          f"{result['world_size']} ranks on {result['nodes']} node(s); torch {result['torch']}; "
                          f"{iters} iterations after {warmup} warmup"], result["rows"], result["avg_busbw_gbps"],
                         _baseline_footer(result.get("baseline")))
    if result["wrong_total"]:
        typer.echo(f"error: {result['wrong_total']} wrong values", err=True)
        raise typer.Exit(1)


def _baseline_footer(baseline: dict | None) -> list[str]:
    if not baseline:
        return []
    if baseline.get("error"):
        return [f"same-run loopback baseline failed: {baseline['error']}"]
    figs = ", ".join(f"{r['busbw_gbps']:.3g} at {r['size_bytes']}" for r in baseline["rows"])
    return [f"same-run baseline (busbw GB/s at B): {figs}; {baseline['what']}"]


def _cores() -> int:
    """Cores this process may run on (its CPU affinity: a container's or a Slurm step's), else the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


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


Calib = Annotated[Optional[str], typer.Option(help="Write the measurements into this catalog copy (created from "
                                                   "the shipped one); use it with GPUCLUSTER_CATALOG=DIR")]
GpuName = Annotated[Optional[str], typer.Option(help="Catalog GPU the calibration is for (default: from the device name)")]


def _skip(reason: str, json_out: bool) -> None:
    if json_out:
        print_json({"skipped": reason})
    else:
        typer.echo(f"skipped: {plain(reason)}")


def _gpu_for(name: str | None, device: str) -> str:
    from gpucluster.catalog import catalog
    from gpucluster.errors import UserError

    if name:
        return catalog.gpus.canonical(name, field="--gpu")
    for cand in catalog.gpus.names():
        short = cand.split("-")[0]
        if short.lower() in device.lower():
            return cand
    raise UserError(f"cannot tell which catalog GPU {device!r} is; give --gpu", field="--gpu")


def _gpu_options(iters: int, gpu: str | None) -> None:
    """--iters and --gpu of gemm and hbm, checked before the GPU is looked for (issue 23)."""
    from gpucluster.api_args import count_option
    from gpucluster.catalog import catalog

    count_option(iters, "--iters", 1, MAX_ITERS)
    if gpu:
        catalog.gpus.canonical(gpu, field="--gpu")


@bench_app.command("gemm")
def gemm(sizes: Annotated[str, typer.Option(help="Square sizes m=n=k, comma-separated")] = "1024,2048,4096,8192",
         precision: Annotated[str, typer.Option(help="bf16, fp16, tf32, fp32 (comma-separated)")] = "bf16",
         iters: Annotated[int, typer.Option()] = 20, gpu: GpuName = None, write_calibration: Calib = None,
         json_out: Json = False) -> None:
    """Achieved GEMM TFLOP/s by size and precision (GPU only; skipped with the reason elsewhere)."""
    from gpucluster.bench.compute import PRECISIONS, gemm as run, no_gpu_reason
    from gpucluster.errors import UserError

    precs = [p.strip() for p in precision.split(",") if p.strip()]
    bad = [p for p in precs if p not in PRECISIONS]
    if bad:
        raise UserError(f"unknown precision {bad[0]!r} (valid: {', '.join(PRECISIONS)})", field="--precision")
    try:
        ns = [int(s) for s in sizes.split(",")]
    except ValueError:
        raise UserError(f"expected comma-separated integers, got {sizes[:60]!r}", field="--sizes") from None
    _gpu_options(iters, gpu)
    # Checked on every machine, not only a GPU's: -5, 0 or 10^9 (an allocation of 10^18 elements)
    # reached torch; 65,536 is a 24 GiB bf16 m=n=k problem.
    if not ns or len(ns) > 64 or not all(1 <= n <= 65_536 for n in ns):
        raise UserError(f"1 to 64 sizes, each from 1 to 65,536, got {sizes[:60]!r}", field="--sizes")
    reason = no_gpu_reason()
    if reason:
        return _skip(reason, json_out)
    import torch
    device = torch.cuda.get_device_name()
    rows = run(ns, precs, iters)
    res = {"schema": "gpucluster-bench-gemm/v1", "device": device, "rows": rows}
    if write_calibration:
        from gpucluster.bench.calibration import write_calibration as write
        res["calibration"] = str(write(write_calibration, _gpu_for(gpu, device), gemm_rows=rows, note=device))
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("bench-gemm", res))
        return
    for r in rows:
        typer.echo(f"{r['precision']:>5} {r['m']:>6} x {r['n']:>6} x {r['k']:>6}: {r['tflops']:9.1f} TFLOP/s")
    if write_calibration:
        typer.echo(f"wrote {plain(res['calibration'])}")


@bench_app.command("hbm")
def hbm(size: Annotated[str, typer.Option(help="Buffer size")] = "2G", iters: Annotated[int, typer.Option()] = 20,
        gpu: GpuName = None, write_calibration: Calib = None, json_out: Json = False) -> None:
    """HBM bandwidth from a device-to-device copy (GPU only; skipped with the reason elsewhere)."""
    from gpucluster.bench.compute import hbm as run, no_gpu_reason
    from gpucluster.units import parse_bytes

    from gpucluster.errors import UserError

    try:     # `--size abc` raised ValueError (a traceback) on every machine
        nbytes = parse_bytes(size)
    except ValueError as exc:
        raise UserError(str(exc)[:200], field="--size") from None
    if not 1 <= nbytes <= MAX_BLOCK_BYTES * 16:
        raise UserError(f"must be from 1 byte to {MAX_BLOCK_BYTES * 16 >> 30} GiB, got {size[:60]!r}", field="--size")
    _gpu_options(iters, gpu)
    reason = no_gpu_reason()
    if reason:
        return _skip(reason, json_out)
    res = {"schema": "gpucluster-bench-hbm/v1", **run(nbytes, iters)}
    if write_calibration:
        from gpucluster.bench.calibration import write_calibration as write
        res["calibration"] = str(write(write_calibration, _gpu_for(gpu, res["device"]), hbm_tbps=res["tbps"],
                                       note=res["device"]))
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("bench-hbm", res))
    else:
        typer.echo(f"{plain(res['device'])}: {res['tbps']:.3f} TB/s (copy of {plain(size)}, read + write)")


@bench_app.command("storage")
def storage(path: Annotated[str, typer.Argument(help="Folder on the storage to test")],
            size: Annotated[str, typer.Option(help="Bytes to write and read")] = "1G",
            block: Annotated[str, typer.Option(help="Block size")] = "16M", json_out: Json = False,
            metrics: Metrics = None) -> None:
    """Sequential write (with fsync) and read GB/s: what a checkpoint write and restart see."""
    from gpucluster.bench.compute import storage as run
    from gpucluster.errors import UserError
    from gpucluster.units import parse_bytes

    try:
        nbytes, bbytes = parse_bytes(size), parse_bytes(block)
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc)[:200], field="--size/--block") from None
    if not 1 <= nbytes <= MAX_STORAGE_BYTES:
        raise UserError(f"must be from 1 byte to {MAX_STORAGE_BYTES >> 40} TiB, got {size[:40]!r}", field="--size")
    if not 1 <= bbytes <= MAX_BLOCK_BYTES:
        raise UserError(f"must be from 1 byte to {MAX_BLOCK_BYTES >> 30} GiB (it is held in memory), got {block[:40]!r}",
                        field="--block")
    _outputs(metrics=metrics)
    _free_space(path, nbytes)
    res = {"schema": "gpucluster-bench-storage/v1", **run(path, nbytes, bbytes)}
    if metrics:
        from gpucluster.engines.openmetrics import Family, write_textfile
        fam = Family("gpucluster_storage_throughput_bytes_per_second", "gauge",
                     "Sequential throughput (write includes fsync)", "bytes_per_second")
        fam.add(res["write_gbps"] * 1e9, path=res["path"], direction="write")
        fam.add(res["read_gbps"] * 1e9, path=res["path"], direction="read")
        write_textfile(metrics, [fam])
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("bench-storage", res))
    else:
        typer.echo(f"{plain(res['path'])}: write {res['write_gbps']:.2f} GB/s (fsync included), read {res['read_gbps']:.2f} GB/s"
                   + (" (likely from the page cache)" if res["read_maybe_cached"] else ""))


def _free_space(path: str, nbytes: int) -> None:
    """The file is written whole before it is read: refuse a size the file system cannot hold
    (2**63 bytes wrote until the file-size limit), keeping 5% and 1 GiB free for everyone else."""
    from gpucluster.errors import UserError
    from gpucluster.output_file import shown_name

    from gpucluster.files import is_file

    try:
        if not os.path.isdir(path) or is_file(path):
            raise UserError("not a directory", file=shown_name(path))
        st = os.statvfs(path)
    except (OSError, ValueError) as exc:
        raise UserError(getattr(exc, "strerror", None) or "not a valid path", file=shown_name(path)) from None
    free = st.f_bavail * st.f_frsize
    keep = max(1 << 30, st.f_blocks * st.f_frsize // 20)
    if nbytes > free - keep:
        raise UserError(f"{nbytes:,} bytes to write but {max(0, free):,} free (keeping {keep >> 20:,} MiB "
                        "for others); give a smaller --size", file=shown_name(path), field="--size")
