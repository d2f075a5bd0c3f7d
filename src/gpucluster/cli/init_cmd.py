"""`gpucluster init`: write the cluster YAML that `--gpu/--nodes/--nic/...` describe, so no one
hand-edits an example to say "8 nodes of H100 on NDR". Every other command loads the file."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpucluster.cli.cluster_options import DEFAULT_NIC, GpuOpt, NicOpt, NicsOpt, NodesOpt, SwitchOpt

HEADER = """\
# Written by `gpucluster init{args}`.
# Host parts (cpu, cpu_sockets, cpu_cores, ram_gib, local_nvme_tb) are seed 1's AI-Training-NG8 node,
# not yours: edit them. The one storage tier is that node's NVMe (examples/ng8-32node.yaml's hot tier;
# read/write GB/s are estimates there): add your shared file system. The fabric is non-blocking
# ({switch}). No facility section: `facility` and `cost` say what they assume without one.
# `gpucluster schema cluster` prints the JSON Schema for your editor.
"""


def init(
    gpu: GpuOpt = None,
    nodes: NodesOpt = None,
    nic: NicOpt = DEFAULT_NIC,
    nics_per_node: NicsOpt = None,
    switch: SwitchOpt = None,
    name: Annotated[Optional[str], typer.Option(help="Cluster name (default: from the options, e.g. 8xH100...)")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="File to write (default: print it)")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --output if it exists")] = False,
) -> None:
    """Write a cluster spec YAML from --gpu, --nodes, --nic and --nics-per-node, for every other command."""
    import os
    import shlex

    from gpucluster.cli.cluster_options import spec_from_options
    from gpucluster.cli.render import console, safe
    from gpucluster.errors import UserError
    from gpucluster.output_file import shown_name, write_output
    from gpucluster.specs.cluster import dump_cluster, load_cluster

    if gpu is None:
        raise UserError("give --gpu TYPE:COUNT, e.g. gpucluster init --gpu H100:8 --nodes 8 --nic NDR400 -o cluster.yaml",
                        field="--gpu")
    if name is not None and (not name.strip() or len(name) > 200 or not name.isprintable()):
        raise UserError("a cluster name is 1-200 printable characters", field="--name")
    spec = spec_from_options(gpu, nodes, nic, nics_per_node, switch, name)
    # The header repeats the options as the spec read them, never the raw text: `--gpu 'H100:8\n'`
    # (the parser takes blanks around it) broke the comment into a YAML error, and U+2028 got in.
    pool = spec.node_pools[0]
    args = [f"--gpu {pool.gpu}:{pool.gpus_per_node}"] + ([f"--nodes {nodes}"] if nodes is not None else []) \
        + [f"--nic {pool.nic}"]
    if nics_per_node is not None:
        args.append(f"--nics-per-node {nics_per_node}")
    if switch is not None:
        args.append(f"--switch {spec.fabric.switch}")
    text = HEADER.format(args=" " + " ".join(shlex.quote(a) if " " not in a else a for a in args),
                         switch=f"{spec.fabric.topology}, {spec.fabric.switch}") + dump_cluster(spec)
    if output is None:
        print(text, end="")
        return
    if os.path.lexists(output) and not force:
        raise UserError("exists; give --force to overwrite it", file=shown_name(output), field="--output")
    # The one writer (output_file.py): with --force a FIFO, a device (as root, /dev/null would
    # become a regular file), a loop of links or a folder is refused, never renamed over.
    write_output(output, text, field="--output")
    back = load_cluster(output)         # what every other command will read
    pool = back.node_pools[0]
    console.print(f"Wrote {safe(output)}: {safe(back.name)}, {pool.count} x {pool.gpus_per_node} {safe(pool.gpu)}, "
                  f"{pool.nics_per_node} x {safe(pool.nic)} per node, {safe(back.fabric.topology)} of "
                  f"{safe(back.fabric.switch)}. Try: gpucluster topology --cluster {safe(output)}")
