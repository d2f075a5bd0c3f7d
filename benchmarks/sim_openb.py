"""GPU allocation and fragmentation on an openb trace under six placement policies, as ATC'23 measures them.

    python benchmarks/sim_openb.py [--pods FILE] [--nodes FILE] [--policies best-fit,fgd,...]
                                   [--reps 3] [--gpu-spec-share 0.33] [--json]

Weng et al., "Beware of Fragmentation" (USENIX ATC'23), evaluate on the openb
node list (1,213 nodes, 6,212 GPUs) by submitting tasks drawn from the pod list
one after another, without departures, until the requested GPUs ("arrived
workload") reach 130% of the cluster's; a task that fits nowhere fails. At each
arrived level they report the GPU allocation rate and the fragmentation of the
free GPUs against the target workload (src/gpucluster/sim/openb_fill.py,
fragmentation.py). Tasks are drawn with replacement (seeded; `--reps` draws);
CPU-only pods are placed too (they hold CPU that GPU pods need). A pod's
`gpu_spec` limits it to nodes of those GPU models, in the placement and in the
fragmentation measure.

The defaults are ../shared/traces' openb node and pod lists. That pod list names no
GPU type; `--gpu-spec-share S` makes a constrained variant: a seeded share S of
the GPU pods gets a `gpu_spec` of one GPU model, drawn in proportion to the
models' GPUs in the node list among the models with a node that can hold the pod.

`--json` prints one object per line per (trace, policy, arrived level): the
allocation rate, the unallocated-GPU share (1 - allocation), fragmentation over
the free and over all GPUs, failed tasks (means over the draws) and the CPU time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from gpucluster.errors import UserError
from gpucluster.sim.fragmentation import FragModel
from gpucluster.sim.jobs import Job
from gpucluster.sim.openb_fill import LEVELS, POLICIES, fill
from gpucluster.sim.state import WHOLE, ClusterState
from gpucluster.sim.traces import read
from gpucluster.sim.traces.openb import read_nodes

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def constrain(pods: list, nodes: list, share: float, seed: int = 0) -> list:
    """A share of the GPU pods limited to one GPU model, drawn by the models' GPU counts among the
    models with a node that can hold the pod (GPUs, CPU, memory), so no constraint is impossible."""
    gpus_by_model: dict[str, int] = {}
    for n in nodes:
        gpus_by_model[n.gpu_type] = gpus_by_model.get(n.gpu_type, 0) + n.gpus
    models = sorted(gpus_by_model)
    rng = np.random.default_rng(seed)
    out = []
    for p in pods:
        if p.gpus > 0 and p.gpu_types is None and rng.random() < share:
            ok = [m for m in models if any(n.gpu_type == m and n.gpus >= p.gpus and n.cpu_milli >= p.cpu_milli
                                           and n.mem_mib >= p.mem_mib for n in nodes)]
            if ok:
                w = np.array([gpus_by_model[m] for m in ok], dtype=float)
                p = dataclasses.replace(p, gpu_types=(ok[int(rng.choice(len(ok), p=w / w.sum()))],))
        out.append(p)
    return out


def measure(label: str, nodes, pods, policies: list[str], reps: int) -> list[dict]:
    st = ClusterState(nodes)
    model_jobs = [Job(0, "m", "batch", p.gpus, 0.0, 1.0, milli=p.milli, cpu_milli=p.cpu_milli,
                      types=frozenset(p.gpu_types) if p.gpu_types else None) for p in pods if p.gpus]
    rows = []
    for policy in policies:
        t0 = time.process_time()
        runs = []
        for seed in range(reps):
            state = ClusterState(nodes)
            runs.append(fill(policy, state, pods, FragModel.from_jobs(state, model_jobs), seed))
        cpu = time.process_time() - t0
        for i, lvl in enumerate(LEVELS):
            row = {"trace": label, "policy": policy, "arrived": lvl, "reps": reps,
                   "nodes": len(nodes), "gpus": st.total_gpus, "pods": len(pods)}
            for k in runs[0][i]:
                if k != "arrived":
                    row[k] = float(np.mean([r[i][k] for r in runs]))
            row["cpu_s_per_draw"] = cpu / reps
            rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", default=str(SHARED / "openb_pod_list_default.csv"), help="openb pod list CSV")
    ap.add_argument("--nodes", default=str(SHARED / "openb_node_list_gpu_node.csv"), help="openb node list CSV")
    ap.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated: {', '.join(POLICIES)}")
    ap.add_argument("--reps", type=int, default=3, help="draws per policy")
    ap.add_argument("--gpu-spec-share", type=float, default=None,
                    help="also run a variant where this share of the GPU pods names one GPU model")
    ap.add_argument("--json", action="store_true", help="one JSON object per (trace, policy, level)")
    a = ap.parse_args()
    try:
        policies = [p.strip() for p in a.policies.split(",") if p.strip()]
        bad = [p for p in policies if p not in POLICIES]
        if bad or not policies:
            raise UserError(f"unknown policy {bad[0] if bad else ''!r} (valid: {', '.join(POLICIES)})",
                            field="--policies")
        if a.reps < 1:
            raise UserError("must be at least 1", field="--reps")
        if a.gpu_spec_share is not None and not 0 < a.gpu_spec_share <= 1:
            raise UserError("must be in (0, 1]", field="--gpu-spec-share")
        for flag, path in (("--pods", a.pods), ("--nodes", a.nodes)):
            if not Path(path).is_file():
                raise UserError(f"file not found: {path}", field=flag)
        nodes, _ = read_nodes(a.nodes)
        pods = read("openb", a.pods, cpu_pods=True).jobs
        if not pods:
            raise UserError("no usable pods", file=a.pods)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    traces = [(Path(a.pods).name, pods)]
    if a.gpu_spec_share is not None:
        traces.append((f"{Path(a.pods).name} with gpu_spec on {a.gpu_spec_share:.0%} of GPU pods",
                       constrain(pods, nodes, a.gpu_spec_share)))
    for label, tr in traces:
        typed = sum(1 for p in tr if p.gpus and p.gpu_types)
        if not a.json:
            print(f"{label}: {len(nodes):,} nodes, {sum(n.gpus for n in nodes):,} GPUs; {len(tr):,} pods "
                  f"({sum(1 for p in tr if p.gpus == 1 and p.milli < WHOLE):,} GPU-sharing, "
                  f"{sum(1 for p in tr if p.gpus == 0):,} CPU-only, {typed:,} with a gpu_spec); {a.reps} draws "
                  "with replacement per policy", flush=True)
        rows = measure(label, nodes, tr, policies, a.reps)
        if a.json:
            for r in rows:
                print(json.dumps(r), flush=True)
            continue
        print(f"{'policy':>12} {'cpu s/draw':>10} | " + " ".join(f"{lvl:>6.0%}" for lvl in LEVELS)
              + "   (allocation at each arrived level)")
        for p in policies:
            rs = [r for r in rows if r["policy"] == p]
            print(f"{p:>12} {rs[0]['cpu_s_per_draw']:>10.1f} | " + " ".join(f"{r['allocation']:>6.1%}" for r in rs))
        print(f"{'':>12} {'':>10} | fragmented / free GPUs")
        for p in policies:
            rs = [r for r in rows if r["policy"] == p]
            print(f"{p:>12} {'':>10} | " + " ".join(f"{r['frag_of_free']:>6.1%}" for r in rs))
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
