"""Past Gavel: failures and checkpoints, and LLM gangs on NVLink domains, under Gavel's round-based
policies in the event simulator (`gpucluster simulate`). Gavel's own simulator has neither.

    python benchmarks/sim_gavel_beyond.py                      # both experiments, the whole trace
    python benchmarks/sim_gavel_beyond.py failures --jobs 200  # the first 200 jobs of 2869ce
    python benchmarks/sim_gavel_beyond.py gangs --json         # one JSON object per run

1. `failures` (examples/scenarios/gavel-failures.yaml): Philly trace 2869ce on 36 V100 + 36 P100 +
   36 K80 one-GPU servers, fifo_perf (jobs stay where they are) vs max_min_fairness_perf (jobs move
   between rounds, checkpointing on the way out and paying `restart_s` to resume), with node
   failures at the reliability model's Llama 3 rates (profile llama3) or the seed article's claim
   (one failure per 6 h on 2,048 GPUs, per GPU), and periodic checkpoints every 30 min, 120 min,
   never, or at Young's optimum sqrt(2 x write x MTBF) for each job's gang size.
2. `gangs` (examples/scenarios/gavel-llm-gangs.yaml): the same trace plus 60 Llama 3 8B gangs of
   8-64 GPUs (planner step times) on 8 x H100:8 NVLink nodes; how often a gang gets the fewest
   NVLink domains (nodes) and leaf switches it could use, and what spreading costs (the
   simulator's spread_slowdown: 5% per extra leaf, an estimate), under max_min_fairness_perf with
   `pack` or `topology` placement, and EASY backfill (`backfill`, `topo`) for reference. Mode
   `shared` also lets the trace jobs use the H100s at their V100 speed (an estimate: Gavel's
   table has no H100), so one-GPU jobs fragment the NVLink domains.

cpu s: CPU time of this process for the run (build + simulate), one run, on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpucluster.sim.jobs import COMPLETED  # noqa: E402
from gpucluster.sim.run import build  # noqa: E402
from gpucluster.sim.summary import summarize  # noqa: E402
from gpucluster.specs.scenario import Failures, LoadedScenario, load_scenario  # noqa: E402

H = 3600.0
FAILURES_YAML = ROOT / "examples" / "scenarios" / "gavel-failures.yaml"
GANGS_YAML = ROOT / "examples" / "scenarios" / "gavel-llm-gangs.yaml"


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def seed_per_gpu_hour() -> float:
    """The seed article's 'something fails every 6 hours at 256 nodes' per GPU (catalog profile `seed`)."""
    from gpucluster.catalog.operations import failure_profiles
    from gpucluster.model.reliability import failure_model
    return failure_model(failure_profiles().get("seed")).rate_per_hour(8, 8) / 8


def variant(loaded: LoadedScenario, *, jobs: int | None, policy: str, options: dict[str, Any],
            failures: Failures | None, ckpt_min: float | None, set_ckpt: bool = True) -> LoadedScenario:
    """ckpt_min None with set_ckpt: no checkpoints (the spec's absent field); set_ckpt False keeps the scenario's."""
    spec = loaded.spec
    wls = []
    for w in spec.workloads:
        upd: dict[str, Any] = {}
        if w.kind == "trace":
            upd["limit"] = jobs
            if set_ckpt:
                upd["checkpoint_minutes"] = ckpt_min
        wls.append(w.model_copy(update=upd))
    new = spec.model_copy(update={"workloads": tuple(wls), "policy": policy, "policy_options": options,
                                  "failures": failures})
    return LoadedScenario(new, loaded.cluster, loaded.base, loaded.source, loaded.lines)


# -- experiment 1: failures and checkpoints ----------------------------------------------------------

def young_per_job(sim) -> float:
    """Sets each trace job's checkpoint interval to Young's sqrt(2 delta M), M = its gang's MTBF
    (GPUs x the cluster's failure rate per GPU); returns the interval of a 1-GPU job, hours."""
    from gpucluster.model.reliability import young_interval
    st = sim.state
    per_gpu_h = sim.failures.expected_rate_per_hour() / int(st.node_gpus[~st.node_cloud].sum())
    for j in sim.jobs:
        mtbf_s = H / (per_gpu_h * j.gpus)
        j.ckpt_interval = young_interval(j.ckpt_write, mtbf_s)   # work seconds on the job's fastest type
    return young_interval(sim.jobs[0].ckpt_write, H / per_gpu_h) / H


def run_failures(args) -> list[dict[str, Any]]:
    base = load_scenario(FAILURES_YAML)
    seed_rate = seed_per_gpu_hour()
    rates = {"none": None, "llama3": Failures(profile="llama3"), "seed": Failures(per_gpu_hour=seed_rate)}
    rows = []
    for policy in args.policies.split(","):
        for rate_name, interval in _matrix(args):
            ckpt = None if interval == "none" else 60.0 if interval == "young" else float(interval)
            loaded = variant(base, jobs=args.jobs, policy=policy, options={"round_s": 360},
                             failures=rates[rate_name], ckpt_min=ckpt)
            c0 = cpu_s()
            sim = build(loaded)
            young_h = young_per_job(sim) if interval == "young" else None
            sim.run()
            s = summarize(sim, loaded, 0.0)
            cpu = cpu_s() - c0
            jobs = list(sim.by_id.values())
            gh = s["gpu_hours"]   # reloads after failures ("restart") and after moves ("restart_preemption"), apart
            rows.append({
                "experiment": "failures", "policy": policy, "failures": rate_name, "checkpoint": interval,
                "young_1gpu_h": young_h, "jobs": len(jobs),
                "completed": sum(j.state == COMPLETED for j in jobs),
                "mean_jct_h": s["classes"]["philly"]["jct_s"]["mean"] / H,
                "makespan_h": s["makespan_s"] / H, "goodput": s["goodput"],
                "failures_n": s["failures"]["count"] if "failures" in s else 0,
                "per_gpu_hour": s["failures"]["per_gpu_hour"] if "failures" in s else 0.0,
                "expected_per_gpu_hour": (1 / s["failures"]["expected_cluster_mtbf_hours"] / s["cluster"]["gpus"]
                                          if "failures" in s else 0.0),
                "jobs_interrupted": s["failures"]["jobs_interrupted"] if "failures" in s else 0,
                "lost_failures_gpu_h": gh["lost_failures"] + gh["restart"],
                "lost_work_gpu_h": gh["lost_failures"], "checkpoint_gpu_h": gh["checkpoint"],
                "switch_restart_gpu_h": gh["restart_preemption"],
                "moves": sum(j.preemptions for j in jobs), "cpu_s": cpu})
            _progress(rows[-1], args)
    return rows


def _matrix(args) -> list[tuple[str, str]]:
    out = [("none", "none")]
    for r in args.rates.split(","):
        for i in args.intervals.split(","):
            if r == "seed" and i not in ("none", "young") and not args.full_matrix:
                continue     # the seed rate: the two ends only (keeps a run within a few CPU minutes)
            out.append((r, i))
    return out


# -- experiment 2: LLM gangs on NVLink domains -------------------------------------------------------

class GangWatch:
    """Per start of a gang: NVLink domains (nodes) and leaves used against the fewest possible, and
    the GPU-time its spread slowdown costs (from the segment's wall time)."""

    def __init__(self, sim, cls: str = "llm") -> None:
        self.sim, self.cls = sim, cls
        self.starts = self.min_nodes = self.min_leaves = 0
        self.seg: dict[int, float] = {}
        self.spread_cost_gpu_s = 0.0
        self.gang_gpu_s = 0.0
        sim.hooks_start.append(self.start)
        sim.hooks_stop.append(self.stop)

    def start(self, job) -> None:
        if job.cls != self.cls:
            return
        import numpy as np

        from gpucluster.sim.placement import leaves_used
        st = self.sim.state
        nodes = np.unique(st.gpu_node[job.placed_alloc])
        per_node = int(st.node_gpus[nodes].max())
        self.starts += 1
        fewest_nodes = math.ceil(job.gpus / per_node)
        self.min_nodes += nodes.size == fewest_nodes
        used, _ = leaves_used(st, job.placed_alloc)
        fewest = math.ceil(fewest_nodes / int(st.pool_leaf_size[nodes].max()))
        self.min_leaves += used == fewest
        self.seg[job.id] = job.speed_on(job.placed_type) / job.run_speed      # the slowdown factor

    def stop(self, job, _why: str) -> None:
        slow = self.seg.pop(job.id, None)
        if slow is None:
            return
        wall = self.sim.kernel.now - job.run_start
        self.gang_gpu_s += job.gpus * wall
        self.spread_cost_gpu_s += job.gpus * wall * (1 - 1 / slow)

    def finish(self) -> None:
        for job in list(self.sim.running.values()):
            self.stop(job, "end of run")


def run_gangs(args) -> list[dict[str, Any]]:
    base = load_scenario(GANGS_YAML)
    runs = [("max_min_fairness_perf", {"round_s": args.round_s, "placement": "pack"}),
            ("max_min_fairness_perf", {"round_s": args.round_s, "placement": "topology"}),
            ("backfill", {}), ("topo", {})]
    rows = []
    for mode in [m for m in args.modes.split(",") if m]:
        for policy, opts in runs:
            loaded = variant(base, jobs=args.jobs, policy=policy, options=opts, failures=None, ckpt_min=None,
                             set_ckpt=False)
            c0 = cpu_s()
            sim = build(loaded)
            if mode == "shared":
                for j in sim.jobs:   # trace jobs on the H100 at their V100 speed (an estimate)
                    if j.cls == "philly" and j.speeds:
                        j.speeds = {**j.speeds, "H100-SXM5-80GB": j.speeds.get("V100-SXM2-16GB", 0.0)}
            watch = GangWatch(sim)
            sim.run()
            watch.finish()
            s = summarize(sim, loaded, 0.0)
            cpu = cpu_s() - c0
            gangs = [j for j in sim.by_id.values() if j.cls == "llm"]
            cls = s["classes"]
            rows.append({
                "experiment": "gangs", "mode": mode, "policy": policy, "placement": opts.get("placement", "-"),
                "round_s": opts.get("round_s"),
                "trace_jobs": sum(j.cls == "philly" for j in sim.by_id.values()), "gangs": len(gangs),
                "gangs_completed": sum(j.state == COMPLETED for j in gangs),
                "gang_starts": watch.starts,
                "in_fewest_nvlink_domains": watch.min_nodes / watch.starts if watch.starts else math.nan,
                "in_fewest_leaves": watch.min_leaves / watch.starts if watch.starts else math.nan,
                "spread_cost_gpu_h": watch.spread_cost_gpu_s / H,
                "spread_cost_share": watch.spread_cost_gpu_s / watch.gang_gpu_s if watch.gang_gpu_s else 0.0,
                "gang_mean_jct_h": cls["llm"]["jct_s"]["mean"] / H if cls.get("llm", {}).get("jct_s") else None,
                "trace_mean_jct_h": cls["philly"]["jct_s"]["mean"] / H,
                "makespan_h": s["makespan_s"] / H, "goodput": s["goodput"],
                "gang_moves": sum(j.preemptions for j in gangs), "cpu_s": cpu})
            _progress(rows[-1], args)
    return rows


def planner_spread(models: list[str]) -> list[dict[str, Any]]:
    """The training planner's step time for a gang whose GPUs share NVLink with only d - 1 others (a
    gang scattered over partly free nodes), on the scenario's H100 nodes (same NICs per GPU, the
    fat tree's oversubscription): the physics the simulator's flat spread_slowdown stands in for."""
    from gpucluster.model.topology import scale_out_view
    from gpucluster.model.training.fabric import TrainingFabric
    from gpucluster.plan.train_search import search
    from gpucluster.sim.workload import BATCH_TOKENS
    from gpucluster.specs.workload import load_model_spec

    cluster = load_scenario(GANGS_YAML).cluster
    assert cluster is not None
    pool = cluster.pool("h100")
    view = scale_out_view(cluster, "h100")
    rows = []
    for name in models:
        spec = load_model_spec(name)
        gbs = max(1, round(BATCH_TOKENS / spec.seq_len))
        for g in (8, 16, 32, 64):
            row: dict[str, Any] = {"experiment": "planner_spread", "model": name, "gpus": g}
            for d in (8, 4, 2, 1):
                fab = TrainingFabric(pool.gpu, pool.gpus_per_node, d, view.scale_out_link,
                                     view.nic_gbps_per_gpu_per_direction, view.oversubscription,
                                     view.nodes_per_leaf, f"{pool.nics_per_node} x {pool.nic}")
                best = search(spec, fab, g, gbs, seq_len=spec.seq_len, top=1, precision="bf16").best
                row[f"step_s_domain_{d}"] = None if best is None else best.step_s
            packed = row["step_s_domain_8"]
            for d in (4, 2, 1):
                v = row[f"step_s_domain_{d}"]
                row[f"slowdown_domain_{d}"] = None if (v is None or packed is None) else v / packed
            rows.append(row)
    return rows


# -- output -------------------------------------------------------------------------------------------

def _progress(row: dict[str, Any], args) -> None:
    if args.json:
        print(json.dumps(row), flush=True)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


def table(rows: list[dict[str, Any]], cols: list[str]) -> None:
    """A markdown table (pastes into docs as is)."""
    if not rows:
        return
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", nargs="?", choices=["failures", "gangs", "all"], default="all")
    ap.add_argument("--jobs", type=int, default=None, help="the first N jobs of the trace (default all 533)")
    ap.add_argument("--policies", default="fifo_perf,max_min_fairness_perf")
    ap.add_argument("--rates", default="llama3,seed", help="failure rates: llama3 (profile), seed (per GPU)")
    ap.add_argument("--intervals", default="none,30,120,young", help="checkpoint minutes, none, young")
    ap.add_argument("--full-matrix", action="store_true", help="every interval at every rate")
    ap.add_argument("--modes", default="reserved,shared", help="gangs: H100 reserved for gangs, or shared")
    ap.add_argument("--round-s", type=float, default=360.0, help="gangs: round length of the round-based runs "
                                                                   "(Gavel's 360 s)")
    ap.add_argument("--models", default="llama3-8b,llama3-70b", help="gangs: models for the planner's spread table")
    ap.add_argument("--json", action="store_true", help="one JSON object per run instead of tables")
    args = ap.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        print("--jobs must be >= 1", file=sys.stderr)
        return 2
    from gpucluster.errors import UserError
    try:
        run(args)
    except UserError as exc:    # a bad --models or --policies name: one line, exit 2
        print(exc, file=sys.stderr)
        return 2
    return 0


def run(args) -> None:
    if args.experiment in ("failures", "all"):
        rows = run_failures(args)
        if not args.json:
            table(rows, ["policy", "failures", "checkpoint", "jobs", "mean_jct_h", "makespan_h", "goodput",
                         "failures_n", "jobs_interrupted", "lost_failures_gpu_h", "checkpoint_gpu_h",
                         "switch_restart_gpu_h", "moves", "cpu_s"])
    if args.experiment in ("gangs", "all"):
        rows = run_gangs(args)
        if not args.json:
            table(rows, ["mode", "policy", "placement", "round_s", "gang_starts", "in_fewest_nvlink_domains",
                         "in_fewest_leaves", "spread_cost_gpu_h", "spread_cost_share", "gang_mean_jct_h",
                         "trace_mean_jct_h", "makespan_h", "gang_moves", "cpu_s"])
        rows = planner_spread([m for m in args.models.split(",") if m])
        for r in rows:
            _progress(r, args)
        if not args.json:
            table(rows, ["model", "gpus", "step_s_domain_8", "slowdown_domain_4", "slowdown_domain_2",
                         "slowdown_domain_1"])


if __name__ == "__main__":
    raise SystemExit(main())
