"""An sbatch script from a plan: one torchrun per node under srun, c10d rendezvous on the first node."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucluster.errors import UserError
from gpucluster.generate.nccl import nccl_env
from gpucluster.generate.plan_file import JobPlan
from gpucluster.generate.quoting import check_text, comment, sh, sh_join, slurm_directive
from gpucluster.generate.torchrun import Launch, torchrun_words


@dataclass(frozen=True)
class SlurmOptions:
    job_name: str = "train"
    time: str = "48:00:00"
    partition: str | None = None
    account: str | None = None
    gres_type: str | None = None      # default: the GPU's short name, lowercase (h100)
    socket_ifname: str | None = None
    exclusive: bool = True

    def __post_init__(self) -> None:
        check_text(self.job_name, "--job-name")
        check_text(self.time, "--time")
        check_slurm_time(self.time)
        for f, v in (("--partition", self.partition), ("--account", self.account),
                     ("--gres-type", self.gres_type), ("--socket-ifname", self.socket_ifname)):
            if v is not None:
                check_text(v, f)


# sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit (Slurm also reads -1 as no limit,
# but a negative number is far more often a mistake: UNLIMITED says it).
_SLURM_TIME = re.compile(r"\d{1,9}(:\d{1,2}){0,2}|\d{1,5}-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)


def check_slurm_time(value: str) -> str:
    if not _SLURM_TIME.fullmatch(value):
        raise UserError(f"not a Slurm time limit: {value[:40]!r} (minutes, H:M:S, D-H:M:S or UNLIMITED, "
                        "e.g. 48:00:00)", field="--time")
    return value


def gres_type(gpu: str) -> str:
    """The short GRES type a site would give the GPU: its shortest catalog name, lowercase."""
    from gpucluster.catalog import catalog

    if gpu not in catalog.gpus:
        return gpu.lower()
    entry = catalog.gpus.get(gpu)
    return min([entry.name, *entry.aliases], key=lambda n: (len(n), n)).lower()


def sbatch_script(plan: JobPlan, launch: Launch, opts: SlurmOptions) -> str:
    lay = plan.layout
    d = slurm_directive
    lines = ["#!/bin/bash",
             f"# gpucluster generate slurm: {comment(plan.model)} on {plan.nodes} x {plan.gpus_per_node} "
             f"{comment(plan.gpu)}",
             f"# layout tp={lay['tp']} pp={lay['pp']} dp={lay['dp']} cp={lay.get('cp', 1)} "
             f"ep={lay.get('ep', 1)} micro_batch={lay['micro_batch']} global_batch={lay['global_batch']}; "
             f"predicted step {plan.step_s:.3g} s",
             f"#SBATCH --job-name={d(opts.job_name)}",
             f"#SBATCH --nodes={plan.nodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --gres=gpu:{d(opts.gres_type or gres_type(plan.gpu))}:{plan.gpus_per_node}"]
    if opts.exclusive:
        lines.append("#SBATCH --exclusive")
    lines.append(f"#SBATCH --time={d(opts.time)}")
    if opts.partition:
        lines.append(f"#SBATCH --partition={d(opts.partition)}")
    if opts.account:
        lines.append(f"#SBATCH --account={d(opts.account)}")
    lines += ["", "set -euo pipefail", f"# NCCL for the {comment(plan.scale_out_link or 'single-node')} fabric"]
    for name, value, why in nccl_env(plan, opts.socket_ifname):
        lines.append(f"export {name}={sh(value)}  # {comment(why)}")
    lines += ["# the first node; sed reads to the end, so scontrol gets no SIGPIPE under pipefail (head would)",
              'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
              "export MASTER_ADDR",
              f"export MASTER_PORT={launch.port}",
              'echo "job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s), rendezvous $MASTER_ADDR:$MASTER_PORT"']
    words = torchrun_words(plan, launch, nnodes="$SLURM_JOB_NUM_NODES", endpoint="$MASTER_ADDR:$MASTER_PORT",
                           rdzv_id="$SLURM_JOB_ID")
    lines.append("srun --kill-on-bad-exit=1 " + sh_join(words))
    return "\n".join(lines) + "\n"
