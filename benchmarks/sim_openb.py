"""GPU allocation and fragmentation on the openb trace, best fit vs FGD, as ATC'23 measures them.

    python benchmarks/sim_openb.py [--reps 3] [--until 1.3] [--traces ../shared/traces]

Weng et al., "Beware of Fragmentation" (USENIX ATC'23), evaluate on the openb
node list (1,213 nodes, 6,212 GPUs) by submitting tasks drawn from the pod list
one after another, without departures, until the requested GPUs ("arrived
workload") reach 130% of the cluster's; a task that fits nowhere fails. At each
arrived level they report the GPU allocation rate (allocated / total GPUs) and
the fragmentation of the free GPUs against the target workload (the pod list's
own task mix: F_n(M), see src/gpucluster/sim/fragmentation.py). Here tasks are
drawn with replacement (seeded; `--reps` draws); CPU-only pods are placed too
(they hold CPU that GPU pods need).

Policies: best fit (a share on the GPU with the least free part that fits; a
whole-GPU task on the fullest node that fits; a CPU-only pod on the node with the
least free CPU) and FGD (each where the fragmentation grows least).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from gpucluster.sim.fragmentation import FragModel
from gpucluster.sim.placement import Scratch, place_share, place_whole
from gpucluster.sim.state import WHOLE, ClusterState
from gpucluster.sim.traces import read
from gpucluster.sim.traces.openb import read_nodes

LEVELS = (0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)


def cpu_node(scr: Scratch, frag: FragModel | None, cpu: int, mem: int) -> int | None:
    ok = scr.usable & (scr.cpu_free >= cpu) & (scr.mem_free >= mem)
    cand = np.flatnonzero(ok)
    if not cand.size:
        return None
    if frag is not None:
        return frag.best_node(scr, cand, 0, cpu)
    return int(cand[np.argmin(scr.cpu_free[cand])])


def run(policy: str, nodes, pods, model_jobs, seed: int, until: float) -> list[dict]:
    st = ClusterState(nodes)
    scr = Scratch(st)
    frag_model = FragModel.from_jobs(st, model_jobs)
    use = frag_model if policy == "fgd" else None
    rng = np.random.default_rng(seed)
    total = st.total_gpus
    arrived = failed = placed = 0.0
    out, levels = [], list(LEVELS)
    while levels:
        p = pods[int(rng.integers(len(pods)))]
        demand = p.gpus * (p.milli / WHOLE if p.gpus == 1 else 1.0)
        arrived += demand
        g = None
        if p.gpus == 0:
            node = cpu_node(scr, use, p.cpu_milli, p.mem_mib)
            if node is not None:
                scr.cpu_free[node] -= p.cpu_milli
                scr.mem_free[node] -= p.mem_mib
                placed += 1
            else:
                failed += 1
        else:
            if p.milli < WHOLE:
                g = place_share(scr, p.milli, None, p.cpu_milli, p.mem_mib, policy if use else "best-fit", use)
            else:
                g = place_whole(scr, p.gpus, None, "fgd" if use else "pack", p.cpu_milli, p.mem_mib, use)
            if g is None:
                failed += 1
            else:
                scr.take(g, p.milli, p.cpu_milli, p.mem_mib)
                placed += 1
        while levels and arrived >= levels[0] * total:
            alloc = (total * WHOLE - scr.gpu_free.sum()) / WHOLE
            fgpus, free = frag_model.cluster(scr.gpu_free, scr.cpu_free, scr.usable)
            out.append({"arrived": levels.pop(0), "allocation": alloc / total, "frag_of_free": fgpus / free if free else 0.0,
                        "frag_of_total": fgpus / total, "failed_tasks": failed, "placed_tasks": placed})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    a = ap.parse_args()
    base = Path(a.traces)
    nodes, _ = read_nodes(str(base / "openb_node_list_gpu_node.csv"))
    got = read("openb", str(base / "openb_pod_list_default.csv"), cpu_pods=True)
    pods = got.jobs
    from gpucluster.sim.jobs import Job
    model_jobs = [Job(0, "m", "batch", p.gpus, 0.0, 1.0, milli=p.milli, cpu_milli=p.cpu_milli) for p in pods if p.gpus]
    print(f"openb: {len(nodes):,} nodes, {sum(n.gpus for n in nodes):,} GPUs; {len(pods):,} pods "
          f"({sum(1 for p in pods if p.gpus == 1 and p.milli < WHOLE):,} GPU-sharing, "
          f"{sum(1 for p in pods if p.gpus == 0):,} CPU-only); {a.reps} draws with replacement per policy")
    results = {}
    for policy in ("best-fit", "fgd"):
        t0 = time.perf_counter()
        runs = [run(policy, nodes, pods, model_jobs, seed, LEVELS[-1]) for seed in range(a.reps)]
        results[policy] = runs
        print(f"  {policy}: {time.perf_counter() - t0:.1f} s")
    print(f"\n{'arrived':>8} | {'allocation best-fit':>19} {'FGD':>7} | {'frag/free best-fit':>18} {'FGD':>7} | "
          f"{'frag/total best-fit':>19} {'FGD':>7} | {'failed tasks bf':>15} {'FGD':>6}")
    for i, lvl in enumerate(LEVELS):
        row = {}
        for policy, runs in results.items():
            row[policy] = {k: float(np.mean([r[i][k] for r in runs])) for k in runs[0][i] if k != "arrived"}
        b, f = row["best-fit"], row["fgd"]
        print(f"{lvl:>7.0%} | {b['allocation']:>19.1%} {f['allocation']:>7.1%} | {b['frag_of_free']:>18.1%} "
              f"{f['frag_of_free']:>7.1%} | {b['frag_of_total']:>19.1%} {f['frag_of_total']:>7.1%} | "
              f"{b['failed_tasks']:>15,.0f} {f['failed_tasks']:>6,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
