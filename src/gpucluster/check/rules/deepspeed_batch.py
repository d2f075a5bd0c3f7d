"""DeepSpeed's batch identity: train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel size (DeepSpeed refuses to start otherwise; with
two of the three given it derives the third, which must be a whole number).

Data-parallel size = world size / (tensor x pipeline parallel x the config's
`sequence_parallel_size`, DeepSpeed-Ulysses: deepspeed/runtime/config.py divides the world by it
before checking the batch): the world from the other job
files (sbatch nodes x GPUs, torchrun nnodes x nproc_per_node, Kubernetes pods x GPUs), else the
job's GPUs on the cluster; tensor/pipeline sizes from launch options, else 1 (ZeRO is data-parallel).
"""

from __future__ import annotations

from gpucluster.check.context import as_int
from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule
from gpucluster.check.rules.sbatch_gres import gpu_request

KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def world_size(ctx) -> tuple[int, str]:
    for job in ctx.jobs:
        req = gpu_request(job)
        nodes = as_int(job.directives.get("nodes"))
        if req and nodes:
            return nodes * req[0], f"{job.path}: {nodes} nodes x {req[0]} GPUs"
        for c in job.commands:
            nn, npn = as_int(c.option("nnodes")), as_int(c.option("nproc_per_node", "nproc-per-node"))
            if nn and npn and c.option("nnodes").value.isdigit():
                return nn * npn, f"{job.path}: torchrun {nn} nodes x {npn} processes"
        for w in job.workloads:
            g, p = as_int(w.gpus_per_pod), as_int(w.pods)
            if g and p:
                return g * p, f"{job.path}: {p} pods x {g} GPUs"
    return ctx.job_gpus, f"the cluster: {ctx.job_nodes} nodes x {ctx.pool.gpus_per_node} GPUs (no job file says)"


def model_parallel(ctx) -> tuple[int, int]:
    tp = pp = 1
    for job in ctx.jobs:
        for c in job.commands:
            tp = as_int(c.option("tensor-model-parallel-size", "tensor-parallel-size", "tp")) or tp
            pp = as_int(c.option("pipeline-model-parallel-size", "pipeline-parallel-size", "pp")) or pp
    return tp, pp


@rule
class DeepSpeedBatch(Rule):
    id = "deepspeed-batch"
    summary = "DeepSpeed train_batch_size != micro batch x accumulation x data-parallel size"

    def check(self, ctx):
        for job in ctx.jobs:
            cfg = job.deepspeed
            if not cfg:
                continue
            vals = {k: cfg.get(k) for k in KEYS}
            if any(isinstance(v, str) for v in vals.values()):      # "auto" (Hugging Face integration)
                continue
            given = {k: v for k, v in vals.items() if isinstance(v, int) and not isinstance(v, bool)}
            if len(given) < 2:
                continue
            world, basis = world_size(ctx)
            tp, pp = model_parallel(ctx)
            sp = cfg.get("sequence_parallel_size", 1)
            sp = sp if isinstance(sp, int) and not isinstance(sp, bool) and sp >= 1 else 1
            dp = world // (tp * pp * sp)
            tbs, mb, gas = (given.get(k) for k in KEYS)
            ev = {"world_size": world, "world_basis": basis, "tp": tp, "pp": pp, "sp": sp, "dp": dp} | given
            line = job.deepspeed_lines.get("train_batch_size") or job.deepspeed_lines.get(next(iter(given)))
            if dp < 1:
                yield Finding(self.id, "error", f"tensor x pipeline parallel {tp} x {pp} exceeds the world size {world}",
                              f"tensor x pipeline parallel at most {world} GPUs", ev, job.at(line))
                continue
            if tbs is not None and mb is not None and gas is not None:     # all three given
                if tbs != mb * gas * dp:
                    yield Finding(self.id, "error", f"train_batch_size {tbs} != micro batch {mb} x accumulation {gas} "
                                  f"x data-parallel {dp} = {mb * gas * dp}: DeepSpeed will not start",
                                  f"train_batch_size: {mb * gas * dp}, or gradient_accumulation_steps: "
                                  f"{tbs / (mb * dp):g}", ev, job.at(line))
                continue
            other = mb if mb is not None else gas
            if tbs is None or other is None:
                continue
            derived = tbs / (other * dp)
            if derived < 1 or derived != int(derived):
                name = "gradient_accumulation_steps" if mb is not None else "train_micro_batch_size_per_gpu"
                yield Finding(self.id, "error", f"train_batch_size {tbs} / ({other} x data-parallel {dp}) = "
                              f"{derived:g}: {name} must be a whole number >= 1",
                              f"train_batch_size a multiple of {other * dp}", ev, job.at(line))
