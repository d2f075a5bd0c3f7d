"""Can the wait comparison tell a right twin from a wrong one? A known scheduler makes a Slurm
history, the history is written as a `sacct -P` export (whole seconds, as sacct prints them),
and replayed under several policies: the right one must reproduce the recorded waits, the
wrong ones must not.

    python benchmarks/sim_calibration.py [--jobs-per-account 300] [--seed 2] [--json]

The history: three accounts (a: many short jobs, b: fewer long ones, c: a few 1-hour jobs;
1-16 GPUs, exponential run times) on 32 H100, time limits as users set them (the run time
x U(1, 4), rounded up to 15 minutes). It is made under (1) backfill planned with those limits,
(2) multifactor with fair share (PriorityWeightFairshare 10000, PriorityWeightAge 1000,
PriorityDecayHalfLife 1 day) under the same backfill, then replayed under fifo, backfill with
limits, backfill with real run times, and the multifactor configuration. One JSON object per
line with --json: history, replay, jobs, recorded and simulated p50/p90 (s), median and mean
|error| (s), the replay's CPU seconds.

Slurm partitions: a third history is made by backfill on the same nodes named gpu[01-04], with
account a's jobs (1-8 GPUs) in a `debug` partition on gpu01 alone with PriorityTier 2 and the
others in `batch` on every node; it is replayed without partitions, with the node sets alone, and
with node sets and tiers (the scenario `slurm import` writes from `scontrol show partition`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gpucluster.sim.run import build
from gpucluster.sim.summary import summarize
from gpucluster.sim.traces.sacct import write_sacct
from gpucluster.specs.loader import parse_data
from gpucluster.specs.scenario import LoadedScenario, Scenario

MF = {"PriorityWeightFairshare": 10000, "PriorityWeightAge": 1000, "PriorityDecayHalfLife": "1-0"}
HISTORIES = {"backfill (limits)": ("backfill", {}), "multifactor fair share": ("multifactor", MF)}
REPLAYS: dict[str, tuple[str, dict]] = {"fifo": ("fifo", {}), "backfill (limits)": ("backfill", {}),
           "backfill (run times)": ("backfill", {"estimate": "runtime"}), "multifactor fair share": ("multifactor", MF)}
HOSTNAMES = {"h100": "gpu[01-04]"}
PARTS = {"debug": {"nodes": "gpu01", "priority_tier": 2}, "batch": {"nodes": "gpu[01-04]", "priority_tier": 1}}
PART_HISTORY = "backfill + partitions (debug: 1 of 4 nodes, tier 2)"
PART_REPLAYS: dict[str, dict] = {"backfill (limits), no partitions": {},
                                 "backfill (limits), node sets only": {q: {"nodes": v["nodes"]} for q, v in PARTS.items()},
                                 "backfill (limits), node sets and tiers": PARTS}
CLUSTER = {"name": "c32", "fabric": {"topology": "fat-tree", "switch": "QM9700"},
           "node_pools": [{"name": "h100", "count": 4, "gpu": "H100:8", "cpu_cores": 112, "ram_gib": 2048,
                           "nics_per_node": 8, "nic": "NDR400"}]}


def loaded(workloads: list[dict], policy: str, options: dict, seed: int, queues: dict | None = None) -> LoadedScenario:
    spec = parse_data(Scenario, {"name": "calibration", "cluster": CLUSTER, "policy": policy,
                                 "policy_options": options, "seed": seed, "workloads": workloads,
                                 "queues": queues or {}, "hostnames": HOSTNAMES if queues else {}}, "<calibration>")
    assert not isinstance(spec.cluster, str)     # given inline
    return LoadedScenario(spec, spec.cluster, Path("."), "<calibration>", {})


def history(n: int, policy: str, options: dict, seed: int, path: str, queues: dict | None = None) -> int:
    def account(name: str, per_day: float, mean_h: float, gpus: list[int]) -> dict:
        return {"kind": "training", "name": name, "queue": name, "gpus": gpus,
                "arrivals": {"process": "poisson", "per_day": per_day, "count": n},
                "duration_hours": {"dist": "exponential", "mean": mean_h}}
    a_gpus = [1, 2, 4, 8] if queues else [1, 2, 4, 8, 16]    # a debug job fits its one node
    sim = build(loaded([account("a", 24, 2, a_gpus), account("b", 12, 4, [1, 2, 4, 8, 16]),
                        account("c", 8, 1, [1, 2, 4, 8, 16])], policy, options, seed, queues))
    rng = np.random.default_rng(seed)
    for j in sim.jobs:   # limits as users set them: generous, in quarter hours
        j.time_limit_s = math.ceil(j.work * rng.uniform(1, 4) / 900) * 900
        if queues:
            j.partition = "debug" if j.queue == "a" else "batch"
    sim.run()
    return write_sacct(list(sim.by_id.values()), path)


def replay(path: str, policy: str, options: dict, queues: dict | None = None) -> dict:
    t0 = time.process_time()
    ld = loaded([{"kind": "trace", "name": "history", "format": "sacct", "path": path}], policy, options, 0, queues)
    sim = build(ld)
    sim.run()
    s = summarize(sim, ld, 0.0)
    a = s["recorded_waits"]["all"]
    return {"jobs": a["compared"], "recorded_p50_s": a["recorded_s"]["p50"], "simulated_p50_s": a["simulated_s"]["p50"],
            "recorded_p90_s": a["recorded_s"]["p90"], "simulated_p90_s": a["simulated_s"]["p90"],
            "median_abs_error_s": a["median_abs_error_s"], "mean_abs_error_s": a["mean_abs_error_s"],
            "cpu_s": time.process_time() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs-per-account", type=int, default=300)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", choices=["policies", "partitions"], help="run one of the two experiments")
    a = ap.parse_args()
    def show(r: dict) -> None:
        if a.json:
            print(json.dumps(r))
            return
        m = 60
        print(f"{r['history']:24s} replayed as {r['replay']:24s} {r['jobs']:5d} jobs  p50 "
              f"{r['recorded_p50_s'] / m:6.1f} -> {r['simulated_p50_s'] / m:6.1f} min  p90 "
              f"{r['recorded_p90_s'] / m:6.1f} -> {r['simulated_p90_s'] / m:6.1f} min  mean |error| "
              f"{r['mean_abs_error_s'] / m:6.1f} min  ({r['cpu_s']:.1f} CPU s)")

    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "history.txt")
        if a.only != "partitions":
            for hname, (hpol, hopts) in HISTORIES.items():
                rows = history(a.jobs_per_account, hpol, hopts, a.seed, path)
                for rname, (rpol, ropts) in REPLAYS.items():
                    show({"history": hname, "replay": rname, "rows": rows, **replay(path, rpol, ropts)})
        if a.only != "policies":
            rows = history(a.jobs_per_account, "backfill", {}, a.seed, path, PARTS)
            for rname, queues in PART_REPLAYS.items():
                show({"history": PART_HISTORY, "replay": rname, "rows": rows, **replay(path, "backfill", {}, queues)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
