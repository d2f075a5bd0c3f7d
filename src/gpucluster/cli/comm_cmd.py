"""`gpucluster comm`: the nccl-tests table a healthy cluster should print."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from gpucluster.cli.render import print_json

_TYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "int32": 4}
_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
_ROOT = {"broadcast": 0, "reduce": 0}


def comm(
    cluster: Annotated[Optional[str], typer.Option(help="Cluster spec YAML")] = None,
    pool: Annotated[Optional[str], typer.Option(help="Node pool of the cluster (default: the first)")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="Without --cluster: GPU type and count per node, e.g. H100:8")] = None,
    nic: Annotated[str, typer.Option(help="Without --cluster: NIC/fabric, e.g. NDR400, RoCE-400G, Ethernet-100G")] = "NDR400",
    nics_per_node: Annotated[Optional[int], typer.Option(help="Without --cluster: NICs per node (default: one per GPU)")] = None,
    op: Annotated[str, typer.Option(
        help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv")] = "all_reduce",
    gpus: Annotated[Optional[int], typer.Option(help="GPUs in the group (default: one node)")] = None,
    min_size: Annotated[str, typer.Option("--min", "-b", help="Smallest size (nccl-tests -b)")] = "8",
    max_size: Annotated[str, typer.Option("--max", "-e", help="Largest size (nccl-tests -e)")] = "8G",
    factor: Annotated[int, typer.Option("--step-factor", "-f", help="Size multiplier (nccl-tests -f)")] = 2,
    datatype: Annotated[str, typer.Option("--datatype", "-d", help="float, half, bfloat16, double, int8, int32")] = "float",
    algo: Annotated[str, typer.Option(help="auto (as NCCL's tuner), ring, nvls, hierarchical (NCCL_ALGO)")] = "auto",
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    html: Annotated[Optional[str], typer.Option(help="Also write a self-contained HTML report with plots")] = None,
) -> None:
    """Print the nccl-tests table that a healthy cluster should give: the "expected" side of
    "run nccl-tests before you train"."""
    from gpucluster.errors import UserError
    from gpucluster.model.collectives import ALGORITHMS, OPS, predict
    from gpucluster.cli.placement_args import group_from_cli, group_on_cluster
    from gpucluster.units import parse_bytes, size_sweep

    if op not in OPS:
        raise UserError(f"unknown collective {op!r} (valid: {', '.join(OPS)})", field="--op")
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algorithm {algo!r} (valid: {', '.join(ALGORITHMS)})", field="--algo")
    if datatype not in _TYPE_BYTES:
        raise UserError(f"unknown datatype {datatype!r} (valid: {', '.join(_TYPE_BYTES)})", field="--datatype")
    try:
        sizes = size_sweep(parse_bytes(min_size), parse_bytes(max_size), factor)
    except ValueError as exc:
        raise UserError(str(exc), field="--min/--max/--step-factor") from None
    if cluster is not None:
        placed = group_on_cluster(cluster, pool, gpus)
    elif gpu is not None:
        placed = group_from_cli(gpu, nic, nics_per_node, gpus)
    else:
        raise UserError("give --cluster FILE, or --gpu TYPE:COUNT (e.g. --gpu H100:8 --nic NDR400)")
    try:
        pred = predict(op, [float(s) for s in sizes], placed.group, algo)
    except ValueError as exc:
        raise UserError(str(exc), field="--algo") from None

    import numpy as np  # already loaded by predict

    tbytes = _TYPE_BYTES[datatype]
    n = placed.group.gpus
    time_s, algbw, busbw = (np.atleast_1d(x) for x in (pred.time_s, pred.algbw_gbps, pred.busbw_gbps))
    algorithm, bottleneck = np.atleast_1d(pred.algorithm), np.atleast_1d(pred.bottleneck)
    rows: list[dict[str, Any]] = []
    for i, size in enumerate(sizes):
        count = size // tbytes if op not in ("all_gather", "reduce_scatter") else size // tbytes // n
        rows.append({"size_bytes": size, "count": int(count), "type": datatype, "redop": _REDOP.get(op, "none"),
                     "root": _ROOT.get(op, -1), "time_us": float(time_s[i] * 1e6),
                     "algbw_gbps": float(algbw[i]), "busbw_gbps": float(busbw[i]),
                     "wrong": 0, "algorithm": str(algorithm[i]), "bottleneck": str(bottleneck[i])})
    avg = sum(r["busbw_gbps"] for r in rows) / len(rows)
    data = {"schema": "gpucluster-comm/v1", "op": op, "gpus": n, "placement": placed.describe(),
            "algorithm": algo, "rows": rows, "avg_busbw_gbps": avg}
    from gpucluster.cli.render import console
    if json_out:
        from gpucluster.documents import dump
        print_json(dump("comm", data))
    elif not console.quiet:                     # the table is plain text: --quiet must skip it here
        from gpucluster.cli.nccl_table import algorithm_changes, print_nccl_table
        from gpucluster.cli.safe_text import plain

        # plain print: the placement lines quote the spec's path and pool names, so no control bytes
        print_nccl_table([f"gpucluster comm: expected {op}_perf on a healthy cluster (model, not a measurement)",
                          *(plain(line) for line in placed.describe_lines())], rows, avg, algorithm_changes(rows))
    if html:
        from gpucluster.report.ops_report import write_comm_report
        from gpucluster.documents import parse
        write_comm_report(parse("comm", data), html)
