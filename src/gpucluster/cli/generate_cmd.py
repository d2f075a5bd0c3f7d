"""`gpucluster generate`: job files for the engines people run, from a training plan
(`gpucluster plan train --json > plan.json`) or, for Kueue, a cluster spec."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpucluster.cli.safe_text import plain

generate_app = typer.Typer(help="Write sbatch, torchrun, DeepSpeed, Kubernetes and Kueue files from a plan.",
                           no_args_is_help=True)

PlanArg = Annotated[str, typer.Argument(help="Training plan JSON (gpucluster plan train --json)")]
Script = Annotated[str, typer.Option(help="Training program torchrun starts")]
Args = Annotated[Optional[list[str]], typer.Option("--arg", help="Extra argument for the program (repeat)")]
Style = Annotated[str, typer.Option("--args", help="Layout flags appended for the program: megatron or none")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Write to this file instead of stdout")]
JobName = Annotated[str, typer.Option(help="Job name (any printable text; quoted safely)")]
Ifname = Annotated[Optional[str], typer.Option(help="NCCL_SOCKET_IFNAME (default: ^lo,docker)")]
CkCluster = Annotated[Optional[str], typer.Option(
    "--cluster", help="Cluster spec YAML: checkpoint write time from its storage tiers (as `gpucluster reliability`)")]
CkGbps = Annotated[Optional[float], typer.Option(
    "--checkpoint-write-gbps", help="Without --cluster: GB/s the job writes checkpoints at (default 10, an assumption)")]
CkEvery = Annotated[Optional[str], typer.Option(
    "--checkpoint-interval", help="Checkpoint this often (30m, 2h, 1800) instead of Daly's optimum")]


def _check_out(out: str | None) -> None:
    """An -o path that cannot be written is refused before the plan is even read."""
    if out is not None:
        from gpucluster.generate.output import check_out_path
        check_out_path(out)


def _emit(text: str, out: str | None, executable: bool = False, warnings: list[str] | None = None) -> None:
    """Called only once the whole text is generated: a bad plan writes nothing anywhere. The
    warnings come after a write that worked: a failed one is the run's only line."""
    if out is not None:
        from gpucluster.generate.output import write_atomic

        write_atomic(out, text, executable)
    for w in warnings or ():
        typer.echo(f"warning: {plain(w)}", err=True)
    if out is None:
        typer.echo(text, nl=False)
        return
    typer.echo(f"wrote {plain(str(out))}", err=True)


def _launch(script: str, arg: list[str] | None, style: str, ds: str | None = None):
    from gpucluster.generate.torchrun import Launch

    return Launch(script=script, script_args=tuple(arg or ()), arg_style=style, deepspeed_config=ds)


def _with_checkpoints(launch, job, cluster: str | None, gbps: float | None, every: str | None):
    """The launch with the job's checkpoint interval (Megatron-LM arguments only)."""
    from dataclasses import replace

    from gpucluster.generate.megatron_job import checkpointing
    from gpucluster.generate.megatron_model import model_spec

    if launch.arg_style != "megatron":
        return launch
    ck = checkpointing(job, model_spec(job), cluster=cluster, write_gbps=gbps, interval=every)
    return replace(launch, checkpoint=ck)


def _assumed(job, launch) -> list[str]:
    """The checkpoint interval's assumption, when a default stood in for the storage."""
    ck = launch.checkpoint
    return [f"{job.source}: {ck.assumption}"] if ck is not None and ck.assumption else []


@generate_app.command("slurm")
def slurm(plan: PlanArg, job_name: JobName = "train", time: Annotated[str, typer.Option(help="Slurm --time")] = "48:00:00",
          partition: Annotated[Optional[str], typer.Option(help="Slurm partition")] = None,
          account: Annotated[Optional[str], typer.Option(help="Slurm account")] = None,
          gres_type: Annotated[Optional[str], typer.Option(help="GRES type (default: the GPU's short name)")] = None,
          socket_ifname: Ifname = None, script: Script = "train.py", arg: Args = None, args_style: Style = "megatron",
          deepspeed_config: Annotated[Optional[str], typer.Option(help="Pass this DeepSpeed JSON to the program")] = None,
          cluster: CkCluster = None, checkpoint_write_gbps: CkGbps = None, checkpoint_interval: CkEvery = None,
          out: Out = None) -> None:
    """An sbatch script: nodes, one task per node, GPUs with their type, exclusive, NCCL environment
    for the fabric, torchrun with a c10d rendezvous on the first node. With Megatron-LM arguments:
    the model's shape, data/tokenizer/checkpoint placeholders the job stops without, checkpoints
    at Daly's interval, and a chain of jobs (afterany) that resumes past the time limit."""
    from gpucluster.generate.plan_file import load_plan
    from gpucluster.generate.slurm import SlurmOptions, sbatch_script
    from gpucluster.generate.torchrun import layout_notes

    opts = SlurmOptions(job_name=job_name, time=time, partition=partition, account=account, gres_type=gres_type,
                        socket_ifname=socket_ifname)
    launch = _launch(script, arg, args_style, deepspeed_config)
    _check_out(out)
    job = load_plan(plan)
    launch = _with_checkpoints(launch, job, cluster, checkpoint_write_gbps, checkpoint_interval)
    text = sbatch_script(job, launch, opts)
    _emit(text, out, True, layout_notes(job, args_style, launch)[1] + _assumed(job, launch))


@generate_app.command("torchrun")
def torchrun(plan: PlanArg, head: Annotated[str, typer.Option(help="First node's address or $VARIABLE")] = "$MASTER_ADDR",
             script: Script = "train.py", arg: Args = None, args_style: Style = "megatron",
             cluster: CkCluster = None, checkpoint_write_gbps: CkGbps = None, checkpoint_interval: CkEvery = None,
             out: Out = None) -> None:
    """The torchrun command to run on every node."""
    from gpucluster.generate.plan_file import load_plan
    from gpucluster.generate.torchrun import layout_notes, torchrun_command

    launch = _launch(script, arg, args_style)
    _check_out(out)
    job = load_plan(plan)
    launch = _with_checkpoints(launch, job, cluster, checkpoint_write_gbps, checkpoint_interval)
    text = torchrun_command(job, launch, head) + "\n"
    _emit(text, out, warnings=layout_notes(job, args_style, launch)[1] + _assumed(job, launch))


@generate_app.command("deepspeed")
def deepspeed(plan: PlanArg, out: Out = None) -> None:
    """A DeepSpeed JSON config: batch sizes, ZeRO stage, precision, from the plan's layout (a
    warning on stderr for each part of the layout DeepSpeed's config cannot express)."""
    from gpucluster.generate.deepspeed import deepspeed_json, deepspeed_warnings
    from gpucluster.generate.plan_file import load_plan

    _check_out(out)
    job = load_plan(plan)
    _emit(deepspeed_json(job), out, warnings=deepspeed_warnings(job))


@generate_app.command("k8s")
def k8s(plan: PlanArg, job_name: JobName = "train",
        namespace: Annotated[str, typer.Option(help="Kubernetes namespace")] = "default",
        queue: Annotated[Optional[str], typer.Option(help="Kueue LocalQueue ('' for none)")] = "gpucluster",
        image: Annotated[Optional[str], typer.Option(
            help="Container image (default: the vendor's PyTorch image, CUDA or ROCm)")] = None,
        socket_ifname: Ifname = None, script: Script = "train.py", arg: Args = None, args_style: Style = "megatron",
        cluster: CkCluster = None, checkpoint_write_gbps: CkGbps = None, checkpoint_interval: CkEvery = None,
        out: Out = None) -> None:
    """A Kubernetes Indexed Job (one pod per node, the vendor's GPU resource and image, Kueue label)
    and its headless Service for the torchrun rendezvous."""
    from gpucluster.generate.k8s import K8sOptions, k8s_yaml
    from gpucluster.generate.plan_file import load_plan
    from gpucluster.generate.torchrun import layout_notes

    opts = K8sOptions(job_name=job_name, namespace=namespace, queue=queue or None, image=image,
                      socket_ifname=socket_ifname)
    launch = _launch(script, arg, args_style)
    _check_out(out)
    job = load_plan(plan)
    launch = _with_checkpoints(launch, job, cluster, checkpoint_write_gbps, checkpoint_interval)
    text = k8s_yaml(job, launch, opts)
    _emit(text, out, warnings=layout_notes(job, args_style, launch)[1] + _assumed(job, launch))


@generate_app.command("kueue")
def kueue(cluster: Annotated[str, typer.Argument(help="Cluster spec YAML")],
          queue: Annotated[str, typer.Option(help="LocalQueue name")] = "gpucluster",
          namespace: Annotated[str, typer.Option(help="Namespace of the LocalQueue")] = "default",
          cluster_queue: Annotated[Optional[str], typer.Option(help="ClusterQueue name (default: the cluster's)")] = None,
          node_label: Annotated[Optional[list[str]], typer.Option(
              "--node-label", help="[POOL:]KEY=VALUE node label of the flavors, instead of the GPU's "
                                   "GPU Feature Discovery product label (repeat)")] = None,
          api_version: Annotated[str, typer.Option(help="Kueue API: v1beta2, or v1beta1 before Kueue v0.15")]
          = "v1beta2",
          out: Out = None) -> None:
    """Kueue ResourceFlavor per GPU type (nodes selected by the vendor's product label), ClusterQueue
    with the pools' quotas, LocalQueue."""
    from gpucluster.generate.kueue import kueue_yaml
    from gpucluster.specs.cluster import load_cluster

    _check_out(out)
    text = kueue_yaml(load_cluster(cluster), queue=queue, namespace=namespace, cluster_queue=cluster_queue,
                      node_labels=node_label, api_version=api_version)
    _emit(text, out)
