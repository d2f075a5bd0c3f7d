"""Gavel's heterogeneous-cluster experiment, reproduced (Narayanan et al., OSDI'20).

    python benchmarks/sim_gavel.py [--trace FILE]... [--throughputs FILE]
        [--policies fifo,fifo_perf,max_min_fairness,max_min_fairness_perf] [--json]
        [--cluster 36:36:36] [--round-s 360] [--switch-s 0] [--seed 0]

Defaults: the two public Philly-derived traces in ../shared/traces/philly/, Gavel's 2019
throughput table, 36 V100 + 36 P100 + 36 K80 (one GPU per server), 360 s rounds, seed 0:
the runs whose figures Gavel's own simulator gave (../shared/traces/README.md), which are
printed beside ours with the ratio. `--json` prints one object per (trace, policy):
trace, policy, jobs, mean_jct_h, makespan_h, utilization, cpu_s (+ finished, rounds,
solves, switches, usd = GPU-hours held x USD per GPU-hour of the type). cpu_s is this
process's CPU time for the run (reading the trace and importing scipy's HiGHS excluded).
`fifo_gavel_code` is the agnostic FIFO as Gavel's code places jobs (a completed job's type
to the head of the queue, then the last type, in name order, with room for the gang; `fifo`
draws a type with a free GPU at random): Gavel's FIFO figures are compared with both. Other
policies:
finish_time_fairness(_perf), throughput_per_dollar_perf (prices: --prices, else the
catalog's rental prices of the table's GPUs), max_min_fairness_packed (space sharing: pairs
of jobs on one GPU with the table's packed throughputs, sim/rounds/packed_engine.py; adds
packed_gpu_h).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DEFAULT_TRACES = [SHARED / "philly" / "2869ce.trace", SHARED / "philly" / "0e4a51.trace"]
DEFAULT_TABLE = SHARED / "gavel" / "oracle_throughputs_2019.json"
DEFAULT_POLICIES = "fifo,fifo_gavel_code,fifo_perf,max_min_fairness,max_min_fairness_perf"

# Gavel's own simulator on these runs (../shared/traces/README.md): jobs, mean JCT (h),
# makespan (h), utilization, wall seconds on a 2-vCPU machine.
GAVEL = {
    ("2869ce", "fifo"): (533, 336.6, 2448, 0.671, 48),
    ("2869ce", "fifo_perf"): (533, 238.7, 2270, 0.695, 41),
    ("2869ce", "max_min_fairness"): (533, 174.3, 2301, 0.719, 49),
    ("2869ce", "max_min_fairness_perf"): (533, 85.0, 2270, 0.627, 35),
    ("0e4a51", "fifo"): (1181, 546.9, 6383, 0.376, 169),
    ("0e4a51", "fifo_perf"): (1181, 539.1, 2399, 0.902, 152),
    ("0e4a51", "max_min_fairness"): (1181, 313.3, 3228, 0.703, 156),
    ("0e4a51", "max_min_fairness_perf"): (1181, 214.0, 2489, 0.758, 119),
}


def load(trace: Path, table: Path, gpus: list[str]) -> tuple[np.ndarray, ...]:
    from gpucluster.sim.traces.gavel import read_gavel
    got = read_gavel(str(trace), throughputs=str(table))
    if got.bad:
        print(f"# {got.summary()}", file=sys.stderr)
    arrival = np.array([j.submit for j in got.jobs])
    scale = np.array([j.gpus for j in got.jobs], dtype=np.int64)
    steps = np.array([j.steps for j in got.jobs])
    T = np.array([[(j.speeds or {}).get(g, 0.0) for g in gpus] for j in got.jobs])
    return arrival, scale, steps, T


def prices_of(gpus: list[str], given: str | None = None) -> np.ndarray:
    """USD per GPU-hour of each table GPU: --prices, else the catalog's rental price."""
    if given:
        return np.array([float(x) for x in given.split(",")])
    from gpucluster.catalog import catalog
    from gpucluster.sim.throughputs import catalog_name
    out = []
    for g in gpus:
        name = catalog_name(g)
        p = catalog.gpus.get(name).prices.rental_usd_per_gpu_hour if name in catalog.gpus else None
        out.append(p.value if p is not None else 1.0)
    return np.array(out)


def run_one(trace: Path, table: Path, policy: str, counts: list[int], gpus: list[str], round_s: float,
            switch_s: float, seed: int, prices_arg: str | None = None) -> dict:
    from gpucluster.sim.rounds import load_all
    from gpucluster.sim.rounds.allocation import highs_core
    from gpucluster.sim.rounds.engine import RoundResult, run_rounds
    arrival, scale, steps, T = load(trace, table, gpus)
    alloc = load_all().get(policy)(seed=seed)
    if hasattr(alloc, "type_names"):   # fifo_gavel_code: Gavel's code orders the types by name
        alloc.type_names = list(gpus)
    prices = prices_of(gpus, prices_arg)
    highs_core()   # the one-time import of scipy's HiGHS (~0.5 CPU s) is not part of a run, as reading the trace
    packed = alloc.name == "max_min_fairness_packed"
    if packed:   # space sharing: its own engine, pairs from the table (reading them is not part of a run)
        from gpucluster.sim.rounds.packed_engine import run_packed_rounds, table_pairs
        from gpucluster.sim.throughputs import read_table
        from gpucluster.sim.traces.gavel import read_gavel
        kind, pair_rate = table_pairs(read_table(table), [(j.job_type, j.gpus) for j in
                                                          read_gavel(str(trace), throughputs=str(table)).jobs], gpus)
    t0 = time.process_time()
    res: RoundResult
    if packed:
        res = run_packed_rounds(arrival, scale, steps, T, np.array(counts), kind, pair_rate, alloc,
                                round_s=round_s, switch_s=switch_s)
    else:
        res = run_rounds(arrival, scale, steps, T, np.array(counts), alloc, round_s=round_s, switch_s=switch_s,
                         prices=prices if "dollar" in alloc.name else None)
    cpu = time.process_time() - t0
    jct = res.jct_s
    by_type = res.busy_gpu_s_by_type
    if by_type is None:      # run_rounds always fills it
        raise RuntimeError("run_rounds returned no GPU time per type")
    return {"trace": trace.stem, "policy": alloc.name, "jobs": len(arrival),
            "mean_jct_h": round(float(jct.mean()) / 3600, 2) if len(jct) else None,
            "makespan_h": round(res.makespan_s / 3600, 1), "utilization": round(res.utilization, 3),
            "cpu_s": round(cpu, 2), "finished": int(res.finished.sum()), "rounds": res.rounds, "solves": res.solves,
            "switches": res.switches,
            # GPU-hours held by jobs x USD per GPU-hour of their type (idle GPUs not counted)
            "usd": round(float((by_type / 3600 * prices).sum()), 0),
            # packing only: GPU-hours held by pairs of jobs sharing GPUs
            **({"packed_gpu_h": round(getattr(res, "packed_gpu_s", 0.0) / 3600, 1)} if packed else {})}


# Gavel's FIFO figures are those of its code's placement (fifo_gavel_code): compare both readings with them.
REFERENCE_OF = {"fifo_gavel_code": "fifo"}


def reference(trace: str, policy: str) -> tuple | None:
    return GAVEL.get((trace, REFERENCE_OF.get(policy, policy)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", action="append", type=Path, help="Gavel .trace file (repeatable)")
    ap.add_argument("--throughputs", type=Path, default=DEFAULT_TABLE, help="Gavel throughput table (JSON)")
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated Gavel policy names")
    ap.add_argument("--cluster", default="36:36:36", help="GPUs of each table GPU type, Gavel's -c (v100:p100:k80)")
    ap.add_argument("--gpus", default="v100,p100,k80", help="table GPU types, in --cluster's order")
    ap.add_argument("--round-s", type=float, default=360.0)
    ap.add_argument("--switch-s", type=float, default=0.0, help="seconds a job loses when it resumes or moves")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prices", help="USD per GPU-hour per --gpus type, e.g. Gavel's 2.48,1.46,0.45 "
                                     "(default: the catalog's rental prices)")
    ap.add_argument("--json", action="store_true", help="one JSON object per line per (trace, policy)")
    a = ap.parse_args(argv)
    from gpucluster.errors import UserError
    traces = a.trace or DEFAULT_TRACES
    gpus = [g.strip() for g in a.gpus.split(",")]
    try:
        counts = [int(x) for x in a.cluster.split(":")]
    except ValueError:
        print(f"--cluster: expected GPU counts like 36:36:36, got {a.cluster!r}", file=sys.stderr)
        return 2
    if len(counts) != len(gpus):
        print(f"--cluster has {len(counts)} counts for {len(gpus)} GPU types ({a.gpus})", file=sys.stderr)
        return 2
    rows = []
    try:
        for trace in traces:
            if not trace.is_file():
                raise UserError("trace not found", file=str(trace))
            for pol in [p.strip() for p in a.policies.split(",") if p.strip()]:
                row = run_one(trace, a.throughputs, pol, counts, gpus, a.round_s, a.switch_s, a.seed, a.prices)
                rows.append(row)
                if a.json:
                    print(json.dumps(row), flush=True)
    except UserError as e:
        print(e.message, file=sys.stderr)
        return 2
    if not a.json:
        print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    head = (f"{'trace':8} {'policy':24} {'jobs':>5} {'JCT h':>7} {'Gavel':>7} {'ratio':>6} {'mkspan h':>9} "
            f"{'Gavel':>6} {'util':>6} {'Gavel':>6} {'cpu s':>6} {'Gavel s':>7} {'speedup':>7}")
    out = [head, "-" * len(head)]
    for r in rows:
        g = reference(r["trace"], r["policy"])
        jct = r["mean_jct_h"] or float("nan")
        if g:
            out.append(f"{r['trace']:8} {r['policy']:24} {r['jobs']:>5} {jct:>7.1f} {g[1]:>7.1f} {jct / g[1]:>6.2f} "
                       f"{r['makespan_h']:>9.0f} {g[2]:>6} {r['utilization']:>6.3f} {g[3]:>6.3f} {r['cpu_s']:>6.2f} "
                       f"{g[4]:>7} {g[4] / max(r['cpu_s'], 1e-3):>6.0f}x")
        else:
            out.append(f"{r['trace']:8} {r['policy']:24} {r['jobs']:>5} {jct:>7.1f} {'-':>7} {'-':>6} "
                       f"{r['makespan_h']:>9.0f} {'-':>6} {r['utilization']:>6.3f} {'-':>6} {r['cpu_s']:>6.2f}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
