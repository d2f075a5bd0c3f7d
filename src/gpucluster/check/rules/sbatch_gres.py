"""Slurm scripts whose GPU request, task count or launcher do not match the nodes.

- `--gres=gpu[:TYPE]:N` (or `--gpus-per-node`) above the node's GPUs: the job never starts
  (error); below it with `--exclusive`: GPUs paid for and idle (warning).
- `--ntasks-per-node`: a per-node launcher (torchrun, deepspeed, accelerate) wants 1 task per
  node; `srun python` / `mpirun` want one task per GPU (error otherwise: ranks share GPUs or
  GPUs sit idle). Slurm's default is one task per node.
- `torchrun --nproc_per_node` different from the GPUs requested (error).
- more `--nodes` than the pool has (error).
"""

from __future__ import annotations

from gpucluster.check.context import as_int, nodes_problem
from gpucluster.check.findings import Finding
from gpucluster.check.jobs import JobFile, Setting
from gpucluster.check.rules.base import Rule, rule

PER_NODE_LAUNCHERS = ("torchrun", "deepspeed", "accelerate")


def gpu_request(job: JobFile) -> tuple[int, str | None, Setting] | None:
    """(GPUs per node, GPU type or None, the directive) an sbatch script asks for."""
    s = job.directives.get("gres")
    if s is not None:
        for item in s.value.split(","):
            parts = item.strip().split(":")
            if parts[0] == "gpu":
                count = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
                kind = parts[1] if len(parts) == 3 or (len(parts) == 2 and not parts[1].isdigit()) else None
                return count, kind, s
    s = job.directives.get("gpus-per-node")
    if s is not None:
        parts = s.value.split(":")
        if parts[-1].isdigit():
            return int(parts[-1]), parts[0] if len(parts) == 2 else None, s
    return None


@rule
class SbatchGres(Rule):
    id = "sbatch-gres"
    summary = "sbatch GPUs, tasks or torchrun processes inconsistent with the node's GPUs"

    def check(self, ctx):
        from gpucluster.catalog import catalog

        for job in ctx.jobs:
            if job.kind != "sbatch":
                continue
            req = gpu_request(job)
            pool = ctx.pool
            if req and req[1]:
                pools = [p for p in ctx.spec.node_pools
                         if req[1] in catalog.gpus and catalog.gpus.canonical(req[1]) == p.gpu]
                if not pools:
                    yield Finding(self.id, "error", f"--gres asks for GPU type {req[1]!r}, which no pool has "
                                  f"({', '.join(p.gpu for p in ctx.spec.node_pools)}): the job never starts",
                                  "use the GRES type Slurm's gres.conf defines for these nodes", {"gres": req[2].value},
                                  job.at(req[2].line))
                    continue
                pool = pools[0]
            have = pool.gpus_per_node
            ev = {"node_gpus": have, "pool": pool.name}
            if req:
                n, _, s = req
                if n > have:
                    yield Finding(self.id, "error", f"{s.value} asks for {n} GPUs per node; {pool.name} nodes have "
                                  f"{have}: the job never starts", f"request gpu:{have}", ev | {"requested": n},
                                  job.at(s.line))
                elif n < have and "exclusive" in job.directives:
                    yield Finding(self.id, "warning", f"--exclusive nodes with {have} GPUs but {s.value} uses {n}: "
                                  f"{have - n} GPUs per node idle", f"request gpu:{have}", ev | {"requested": n},
                                  job.at(s.line))
            if req and req[0] == 0:
                yield Finding(self.id, "error", f"{req[2].value} asks for 0 GPUs per node: the job gets no GPU",
                              f"request gpu:{have}", ev | {"requested": 0}, job.at(req[2].line))
            s_nodes = job.directives.get("nodes")
            bad = nodes_problem(s_nodes.value) if s_nodes is not None else None
            if s_nodes is not None and bad:
                yield Finding(self.id, "error", f"--nodes={s_nodes.value[:40]}: {bad}; sbatch refuses the job",
                              "--nodes=N or --nodes=MIN-MAX with 1 <= MIN <= MAX", ev | {"nodes": s_nodes.value[:40]},
                              job.at(s_nodes.line))
            gpus = req[0] if req else None
            nodes = as_int(job.directives.get("nodes")) if not bad else None
            if nodes and nodes > pool.count:
                s = job.directives["nodes"]
                yield Finding(self.id, "error", f"--nodes={s.value} but pool {pool.name} has {pool.count} nodes: the "
                              "job never starts", f"--nodes={pool.count} or fewer", ev | {"nodes": nodes},
                              job.at(s.line))
            if not gpus:
                continue
            per_node = any(lch in PER_NODE_LAUNCHERS for c in job.commands for lch in c.launchers)
            launched = any(c.launchers for c in job.commands)
            tasks_s = job.directives.get("ntasks-per-node")
            tasks = as_int(tasks_s) if tasks_s else (None if "ntasks" in job.directives else 1)
            want = 1 if per_node else min(gpus, have)
            if launched and tasks is not None and tasks != want:
                if per_node:
                    what = (f"a per-node launcher (torchrun/deepspeed) starts the {gpus} GPU processes itself, so "
                            f"each node runs {tasks} launchers")
                elif tasks < gpus:
                    what = f"srun/mpirun starts one rank per task, so {gpus - tasks} GPUs per node sit idle"
                else:
                    what = f"srun/mpirun starts one rank per task, so {tasks - gpus} extra ranks share GPUs"
                yield Finding(self.id, "error", f"--ntasks-per-node={tasks} with {gpus} GPUs per node: {what}",
                              f"--ntasks-per-node={want}", ev | {"ntasks_per_node": tasks, "gpus_per_node": gpus},
                              job.at(tasks_s.line if tasks_s else None))
            for c in job.commands:
                s = c.option("nproc_per_node", "nproc-per-node")
                nproc = as_int(s)
                if s is not None and nproc is not None and s.value.isdigit() and nproc != gpus:
                    yield Finding(self.id, "error", f"torchrun --nproc_per_node={nproc} but the job has {gpus} GPUs per "
                                  "node", f"--nproc_per_node={gpus}", ev | {"nproc_per_node": nproc, "gpus_per_node": gpus},
                                  job.at(s.line))
