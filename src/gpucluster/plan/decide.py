"""The seeds' decision framework, answered with the planners and the cost model.

Seed 2: "Single GPU fits in memory? Use it. No cluster needed. Training fits on one node
(8 GPUs)? Maybe a cluster, maybe not. Need more than one node? Yes, you need a cluster."
and seed 1's build-or-rent rules. Here each rung of the ladder (one CPU node, one GPU, one
node, then 2, 4, 8 ... nodes) is planned by the training planner (memory and time), and the
answer is the smallest rung that fits the model and meets the user's deadline; without a
deadline, the smallest that fits. Build or rent compares the cost model's capital and
operating cost of that cluster with renting it, over the months the user will need it.
No threshold of the seeds' (24 hours, 80% utilization, 18 months) is used: those become
the user's deadline, utilization and horizon.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.model.transformer_flops import model_flops_per_iteration
from gpucluster.plan.fabric_from import from_flags
from gpucluster.plan.reliability_plan import load_failure_model
from gpucluster.plan.run_estimates import default_tokens, train
from gpucluster.specs.cluster import ClusterSpec
from gpucluster.specs.workload import TransformerSpec

MAX_NODES = 2048
# The node a synthetic cluster is built from when costing: seed 1's AI-Training-NG8 parts.
NODE_PARTS = {"cpu": "AMD EPYC 9654", "cpu_sockets": 2, "cpu_cores": 192, "ram_gib": 1536, "local_nvme_tb": 61.44}


@dataclass
class Rung:
    label: str
    kind: str                    # cpu | gpu
    gpus: int
    nodes: int
    fits: bool
    reason: str = ""
    time_s: float | None = None  # failure-free time to train
    mtbf_s: float | None = None
    gpu_hours: float | None = None
    layout: str = ""
    meets_deadline: bool | None = None
    # What the time to train rests on (plan.confidence): "validated" or "assumed", and why.
    confidence: str | None = None
    assumptions: list[str] = field(default_factory=list)


@dataclass
class BuildOrRent:
    rung: Rung
    rent_usd_per_gpu_hour: float
    rent_origin: str
    run_rent_usd: float
    capex_usd: float
    opex_usd_per_month: float
    break_even_months: float
    horizon_months: float
    utilization: float
    build_total_usd: float
    rent_total_usd: float
    answer: str                  # build | rent
    assumptions: list[str] = field(default_factory=list)


def _switch_for(nic_name: str) -> str:
    nic = catalog.nics.get(nic_name)
    ib = nic.fabric == "infiniband"
    ok = [s for _, s in catalog.switches.items()
          if (s.fabric == "infiniband") == ib and s.port_gbit.value >= nic.line_rate_gbit.value]
    if not ok:
        raise UserError(f"no switch in the catalog carries {nic.name} ports", field="--nic")
    return min(ok, key=lambda s: (s.port_gbit.value, -s.radix.value)).name


def synthetic_cluster(gpu: str, per_node: int, nodes: int, nic: str) -> ClusterSpec:
    """A cluster of `nodes` x `per_node` GPUs, one `nic` per GPU, on a non-blocking fat tree."""
    return ClusterSpec.model_validate({
        "name": f"{nodes}x{gpu}:{per_node}",
        "node_pools": [{"name": "gpu", "count": nodes, "gpu": gpu, "gpus_per_node": per_node,
                        "nics_per_node": per_node, "nic": nic, **NODE_PARTS}],
        "fabric": {"topology": "single-switch" if nodes * per_node <= catalog.switches.get(_switch_for(nic)).radix.value
                   else "fat-tree", "switch": _switch_for(nic)},
    })


def cpu_rung(model: TransformerSpec, tokens: int, cpu_name: str, sockets: int) -> Rung:
    """Training on one CPU node at its peak FP32 rate (an upper bound on what it can do)."""
    cpu = catalog.cpus.get(cpu_name, field="--cpu")
    flops = model_flops_per_iteration(model, 1, model.seq_len) / model.seq_len * tokens
    rate = sockets * cpu.peak_fp32_tflops.value * 1e12
    return Rung(f"1 CPU node ({sockets} x {cpu.name}, {sockets * cpu.peak_fp32_tflops.value:g} TFLOP/s FP32 peak)",
                "cpu", 0, 1, True, time_s=flops / rate, layout="at peak FP32: a lower bound on the time")


def gpu_rung(model: TransformerSpec, tokens: int, gpu: str, per_node: int, nodes: int, nic: str, gpus: int | None = None,
             precision: str | None = None, profile: str = "llama3") -> Rung:
    n_gpus = gpus or nodes * per_node
    label = "1 GPU" if n_gpus == 1 else f"1 node ({per_node} GPUs)" if nodes == 1 else f"{nodes} nodes ({n_gpus} GPUs)"
    target = from_flags(f"{gpu}:{n_gpus if nodes == 1 else per_node}", nodes, nic, None)
    fm = load_failure_model(profile)
    mtbf = fm.mtbf_hours(n_gpus, per_node) * 3600
    try:
        plan = train(model, target, tokens, precision)
    except UserError as exc:
        return Rung(label, "gpu", n_gpus, nodes, False, exc.reason, mtbf_s=mtbf)
    conf = plan.confidence
    notes = list(conf.assumptions)   # the above-best-published flag is one of them (plan/confidence.py)
    return Rung(label, "gpu", n_gpus, nodes, True, time_s=plan.time_to_train_s, mtbf_s=mtbf,
                gpu_hours=plan.gpu_hours, layout=plan.best.layout.short(), confidence=conf.level,
                assumptions=notes)


def ladder(model: TransformerSpec, gpu: str, nic: str, tokens: int | None = None, deadline_s: float | None = None,
           cpu: tuple[str, int] = ("EPYC-9654", 2), precision: str | None = None, max_nodes: int = MAX_NODES
           ) -> tuple[list[Rung], Rung | None]:
    """Every rung up to the answer: the smallest that fits and meets the deadline."""
    g = catalog.gpus.get(gpu, field="--gpu")
    per_node = 4 if g.domain_size > 8 else 8     # GB200 trays hold 4 GPUs; HGX/OAM boards 8
    tok = tokens or default_tokens(model)
    rungs = [cpu_rung(model, tok, *cpu)]
    answer = None
    steps = [(1, 1), (1, per_node)] + [(n, n * per_node) for n in _doubling(2, max_nodes)]
    for nodes, gpus in steps:
        r = gpu_rung(model, tok, g.name, per_node, nodes, nic, gpus, precision)
        if r.fits and deadline_s is not None:
            r.meets_deadline = r.time_s is not None and r.time_s <= deadline_s
        rungs.append(r)
        if r.fits and (deadline_s is None or r.meets_deadline):
            answer = r
            break
    for r in rungs[:1]:
        if deadline_s is not None:
            r.meets_deadline = r.time_s is not None and r.time_s <= deadline_s
    return rungs, answer


def _doubling(start: int, stop: int):
    n = start
    while n <= stop:
        yield n
        n *= 2


def build_or_rent(rung: Rung, gpu: str, nic: str, horizon_months: float | None, utilization: float | None = None,
                  overrides: dict | None = None) -> BuildOrRent:
    """Cost the rung's cluster (cost model) against renting it, over `horizon_months`
    (default: just this run)."""
    from gpucluster.model.cost import HOURS_PER_YEAR
    from gpucluster.plan.cost_plan import cost_plan

    per_node = rung.gpus // rung.nodes
    spec = synthetic_cluster(gpu, per_node, rung.nodes, nic)
    plan = cost_plan(spec, overrides=overrides, utilization=utilization)
    on_demand = plan.rent[0]
    run_months = (rung.time_s or 0) / (HOURS_PER_YEAR * 3600 / 12) / plan.utilization
    horizon = horizon_months if horizon_months is not None else run_months
    opex_month = plan.build.opex_usd_per_year / 12
    rent_month = on_demand.usd_per_year(rung.gpus) / 12
    build_total = plan.build.capex_usd + opex_month * horizon
    rent_total = rent_month * horizon
    return BuildOrRent(
        rung, on_demand.usd_per_gpu_hour, on_demand.origin, (rung.gpu_hours or 0) * on_demand.usd_per_gpu_hour,
        plan.build.capex_usd, opex_month, plan.break_even("on-demand"), horizon, plan.utilization, build_total,
        rent_total, "build" if build_total < rent_total else "rent",
        [(f"cluster costed: {rung.nodes} x {per_node} {gpu}, {per_node} x {nic} per node, {spec.fabric.switch} "
         f"{spec.fabric.topology}; node parts as seed 1's NG8 node; no shared storage"),
         (f"horizon {horizon:.1f} months ({'given' if horizon_months is not None else 'this run only'}), "
         f"utilization {plan.utilization:.0%}"), *plan.build.assumptions])
