"""One line of advice on the dominant bottleneck of a plan, backed by a what-if number."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.model.training.step import Estimate
from gpucluster.plan.mfu_reference import mfu_reference
from gpucluster.plan.fabric_from import PlanTarget, with_network
from gpucluster.specs.workload import TransformerSpec

COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "pp_p2p", "dp_comm")
LABEL = {"compute": "compute", "tp_comm": "exposed tensor-parallel communication",
         "cp_comm": "exposed context-parallel communication", "ep_comm": "expert all-to-all",
         "pp_bubble": "the pipeline bubble", "pp_p2p": "pipeline send/recv", "dp_comm": "exposed data-parallel / ZeRO communication",
         "optimizer": "the optimizer step"}
# The reference fabric for network what-ifs: one 400G InfiniBand NIC per GPU (DGX H100/H200 SuperPOD).
REFERENCE_NIC = "NDR400"


@dataclass(frozen=True)
class Advice:
    term: str
    share: float          # of the step
    text: str


def advise(spec: TransformerSpec, est: Estimate, target: PlanTarget, seq_len: int) -> Advice:
    terms, step = est.terms, est.step_s
    comm = sum(terms[t] for t in COMM_TERMS)
    worst = max(terms, key=lambda k: terms[k] if k != "compute" else -1)
    network = _network_advice(spec, est, target, seq_len, comm)
    if network is not None:
        return network
    if worst == "pp_bubble" and terms[worst] / step >= 0.10:
        lay = est.layout
        return Advice(worst, terms[worst] / step,
                      f"the pipeline bubble is {100 * terms[worst] / step:.0f}% of the step: (pp-1)/(v x m) with "
                      f"pp={lay.pp}, v={lay.interleave}, m={lay.microbatches} micro batches; a larger global batch "
                      "or more interleaving shrinks it")
    if worst in COMM_TERMS and terms[worst] / step >= 0.10:
        return Advice(worst, terms[worst] / step,
                      f"{LABEL[worst]} is {100 * terms[worst] / step:.0f}% of the step ({terms[worst]:.2f} s)")
    share = terms["compute"] / step
    text = (f"compute is {100 * share:.0f}% of the step and MFU is {100 * est.mfu:.0f}%: the cluster is used well; "
            "more speed needs faster GPUs or lower precision")
    ref = mfu_reference(target.fabric.gpu_name, est.layout.precision)
    if ref is not None and est.mfu > ref.value + ref.margin:
        # Never call a plan "used well" on an MFU no published run has reached on this chip or its sibling.
        text = (f"compute is {100 * share:.0f}% of the step and MFU is {100 * est.mfu:.0f}%, above the best published "
                f"run on {ref.from_gpu} ({100 * ref.value:.0f}%): the estimate may be optimistic here; read it as "
                "an upper bound until a run on this cluster confirms it")
    if est.layout.recompute != "none":
        text = (f"compute is {100 * share:.0f}% of the step, of which recompute ({est.layout.recompute}) is pure "
                f"overhead forced by memory ({est.memory.total / 2**30:.0f} GiB of {est.memory.capacity / 2**30:.0f}): "
                "GPUs with more HBM or more model parallelism avoid it")
    return Advice("compute", share, text)


def _network_advice(spec: TransformerSpec, est: Estimate, target: PlanTarget, seq_len: int,
                    comm: float) -> Advice | None:
    """On a network slower than one 400G NIC per GPU, what the reference fabric would give:
    the same layout, and the best layout the search finds there (a slow network also
    forces worse layouts, which the layout's exposed communication alone does not show)."""
    from gpucluster.catalog import catalog
    from gpucluster.plan.train_search import search

    fab = target.fabric
    ref = catalog.nics.get(REFERENCE_NIC).line_rate_gbit.value / 8
    if fab.scale_out_link is None or target.gpus <= fab.domain or (fab.nic_gbps_per_gpu or 0) >= ref:
        return None
    better = with_network(target, REFERENCE_NIC, fab.gpus_per_node)
    res = search(spec, better.fabric, target.gpus, est.layout.global_batch, seq_len=seq_len, top=1,
                 precision=est.layout.precision, flash_attention=est.layout.flash_attention)
    if res.best is None or res.best.step_s > 0.95 * est.step_s:
        return None
    step = est.step_s
    share = comm / step
    return Advice("network", share,
                  f"the network: on {fab.nic_name} per node ({fab.nic_gbps_per_gpu:g} GB/s per GPU) the best layout "
                  f"has to keep traffic off it ({est.layout.short()}, {step:.2f} s per step, {100 * share:.0f}% "
                  f"exposed communication); with {better.fabric.nic_name} per node ({ref:g} GB/s per GPU) the "
                  f"best layout ({res.best.layout.short()}) takes {res.best.step_s:.2f} s: "
                  f"{step / res.best.step_s:.2f}x faster")
