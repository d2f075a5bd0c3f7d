"""Simulator speed: 100,000 jobs on a 10,000-GPU cluster with failures over 90 simulated days.

    python benchmarks/sim_speed.py [--jobs 100000] [--nodes 1250] [--days 90] [--policy backfill]

Targets (issue 6): <= 60 s on one core, <= 2 GB of memory; prints events per second. The time
judged is the process's CPU time (user + sys): on a shared machine wall time measures the load
(the run is single-threaded, so its CPU time is what one idle core would take).
The workload is Philly-like: mostly 1-GPU jobs, a tail of gangs up to 512 GPUs,
lognormal run times (median 8 h, sigma 2), Poisson arrivals spread over the 90
days, about 85% offered load; node failures at the Llama 3 rate (reliability
model), 72 h repairs; checkpoints every 60 minutes for the gangs.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from gpucluster.sim.run import simulate
from gpucluster.specs.loader import parse_data
from gpucluster.specs.scenario import LoadedScenario, Scenario


def scenario(jobs: int, nodes: int, days: float, policy: str) -> LoadedScenario:
    per_day = jobs / days
    data = {
        "name": f"speed-{jobs}-jobs-{nodes * 8}-gpus",
        "cluster": {"name": "big", "fabric": {"topology": "fat-tree", "switch": "QM9700"},
                    "node_pools": [{"name": "h100", "count": nodes, "gpu": "H100:8", "cpu_cores": 112,
                                    "ram_gib": 2048, "nics_per_node": 8, "nic": "NDR400", "rail_optimized": True}]},
        "horizon_days": days, "seed": 1, "policy": policy, "failures": {},
        "workloads": [
            {"kind": "batch", "name": "small", "arrivals": {"per_day": per_day * 0.75, "count": int(jobs * 0.75)},
             "tasks": 1, "task_hours": {"dist": "lognormal", "median": 8, "sigma": 2, "max": 2000}},
            {"kind": "training", "name": "gangs", "arrivals": {"per_day": per_day * 0.25, "count": jobs - int(jobs * 0.75)},
             "gpus": {"dist": "choice", "values": [2, 4, 8, 16, 32, 64, 128, 256, 512],
                      "weights": [20, 32, 40, 4, 2, 1, 0.5, 0.3, 0.2]},
             "duration_hours": {"dist": "lognormal", "median": 8, "sigma": 2, "max": 2000},
             "checkpoint_minutes": 60, "checkpoint_write_s": 30, "restart_s": 600},
        ],
    }
    spec = parse_data(Scenario, data, "<sim_speed>")
    assert not isinstance(spec.cluster, str)     # given inline
    return LoadedScenario(spec, spec.cluster, Path.cwd(), "<sim_speed>", {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--days", type=float, default=90)
    ap.add_argument("--policy", default="backfill")
    a = ap.parse_args()
    loaded = scenario(a.jobs, a.nodes, a.days, a.policy)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(loaded)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # Linux: KiB
    s = res.summary
    sim = res.sim
    print(f"{a.jobs:,} jobs on {a.nodes * 8:,} GPUs over {a.days:g} days, policy {a.policy}, failures on")
    print(f"  CPU {cpu:.1f} s, wall {wall:.1f} s (simulation loop {s['wall_s']:.1f} s wall incl. workload "
          f"generation), {sim.kernel.events:,} events, {sim.kernel.events / cpu:,.0f} events per CPU s, "
          f"peak RSS {rss_gb:.2f} GB")
    print(f"  allocation {s['utilization']['allocation']:.1%}, busy {s['utilization']['busy']:.1%}, "
          f"goodput {s['goodput']:.1%}, failures {s['failures']['count']}, completed {s['jobs']['completed']:,}, "
          f"still pending {s['jobs']['pending']:,}, running {s['jobs']['running']:,}")
    ok_time, ok_mem = cpu <= 60, rss_gb <= 2
    print(f"  target <= 60 CPU s: {'PASS' if ok_time else 'FAIL'}; memory <= 2 GB: {'PASS' if ok_mem else 'FAIL'}")
    return 0 if ok_time and ok_mem else 1


if __name__ == "__main__":
    sys.exit(main())
