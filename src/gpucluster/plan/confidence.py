"""What a training estimate rests on: measured, fitted on the chip's own published runs, or assumed.

Every figure a plan prints comes from the same model; what differs is how much of it was
checked on this chip, precision and stack. The plan lists each assumption in the
terminal, the JSON (`assumptions`, `confidence`) and the HTML, and says when its MFU is
above the best published run on that chip and precision (catalog
`efficiency.best_published_mfu`, or its nearest validated sibling's: plan/mfu_reference.py),
because a practitioner who sees an MFU nobody has achieved should know the tool knows it too.

Beside the assumptions, every figure carries a calibrated interval (step_interval,
serving_intervals): the cross-validated errors of the regime the plan falls in
(model/intervals.py, catalog/data/intervals.yaml), so a plan says how far it can be trusted,
and which of its ranked layouts its accuracy cannot tell apart (distinguishable).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpucluster.catalog import catalog
from gpucluster.model.training import attention
from gpucluster.model.training.compute import gemm_curve, sustained
from gpucluster.model.training.power import clock_fraction
from gpucluster.model.training.layout import Layout
from gpucluster.model.training.moe import DEFAULT_MOE_IMBALANCE_SOURCE
from gpucluster.plan.mfu_reference import MfuReference, mfu_reference

if TYPE_CHECKING:
    from gpucluster.model.uncertainty import Interval


@dataclass(frozen=True)
class Confidence:
    assumptions: list[str]
    above_best_published: str | None
    best_published: str | None
    reference: MfuReference | None = None

    @property
    def level(self) -> str:
        """validated: the chip and precision were fitted on their own published runs and the plan
        stays within the best published MFU; assumed: something here is an assumption."""
        return "assumed" if self.assumptions or self.above_best_published else "validated"

    def to_json(self) -> dict:
        return {"confidence": self.level, "assumptions": self.assumptions,
                "above_best_published": self.above_best_published, "best_published": self.best_published,
                "mfu_reference": None if self.reference is None else self.reference.to_json()}


def confidence(gpu_name: str, lay: Layout, mfu: float, moe: bool = False) -> Confidence:
    """`moe`: the model has routed experts (its expert load imbalance is then an input)."""
    gpu = catalog.gpus.get(gpu_name)
    out: list[str] = []
    if moe and lay.moe_imbalance is None:
        out.append(f"{DEFAULT_MOE_IMBALANCE_SOURCE}; set moe_imbalance= to your router's figure")
    curve = gemm_curve(gpu.name, lay.precision)
    if "no " in curve.provenance.split(";")[0] or "one measured" in curve.provenance:
        out.append(f"GEMM rate: {curve.provenance.split(';')[0]}")
    _, why = sustained(gpu.name, lay.precision)
    if "assumed" in why:
        out.append(f"sustained fraction: {why}")
    if lay.flash_attention:
        rate = attention.kernel_rate(gpu.name, attention.resolve_on(lay.attention_kernel, gpu.name))
        if "assumption" in rate.provenance:
            out.append(f"fused attention rate: {rate.provenance}")
    _, clock_why = clock_fraction(gpu.name)
    if clock_why:
        out.append(f"compute clock: {clock_why}")
    if gpu.efficiency.hbm_fraction is None:
        out.append(f"HBM bandwidth: no STREAM-like measurement on {gpu.name}: the lowest fraction among measured chips (conservative)")
    if gpu.sm_count is None:
        out.append(f"no SM count for {gpu.name}: GEMM wave quantization ignored")
    ref = mfu_reference(gpu.name, lay.precision)
    best = above = None
    if ref is None:
        out.append(f"no published {lay.precision} training run on {gpu.name} or a sibling of the same architecture "
                   "to compare the MFU with")
    else:
        best = ref.describe()
        above = ref.flag(mfu)
        # A flag is also an assumption (the figure rests on the chip sustaining more than any published
        # run), and it names the sibling when the reference is borrowed.
        if above:
            out.append(above)
        elif ref.borrowed:
            out.append(f"MFU plausibility: no published {lay.precision} training run on {gpu.name}; compared with "
                       f"its nearest validated sibling's best, {ref.from_gpu} {ref.from_precision} "
                       f"{100 * ref.value:.1f}% ({ref.source})")
    return Confidence(out, above, best, ref)


def step_interval(plan: Any, est: Any = None) -> Interval:
    """The calibrated interval (catalog/data/intervals.yaml) of a plan's step time: of its best
    layout, or of `est`, one of its ranked layouts (the regime is the plan's: chip, precision,
    stack, kernel, scale and model)."""
    from gpucluster.model.intervals import training_interval, training_point

    e = est if est is not None else plan.best
    lay = e.layout
    point = training_point(plan.target.fabric.gpu_name, lay.precision, framework=getattr(lay, "framework", None),
                           attention=getattr(lay, "attention_kernel", None), fused=lay.flash_attention,
                           gpus=plan.target.gpus, seq_len=plan.seq_len, moe=plan.spec.experts > 1)
    iv = training_interval(e.step_s, point)
    # No step runs faster than the chip's peak on the FLOPs it executes (HFU 100%).
    floor = e.step_s * min(1.0, e.hfu)
    return replace(iv, lo=max(iv.lo, floor)) if iv.lo < floor else iv


def distinguishable(best: Interval, other: Interval) -> bool:
    """Whether two layouts' predicted step times are told apart by the model's accuracy: neither
    point lies inside the other's interval."""
    return not (best.contains(other.point) or other.contains(best.point))


def serving_intervals(o: Any, rate: float, output_tokens: float, *, moe: bool, engine: str | None) -> dict[str, Interval]:
    """The calibrated intervals of one serving deployment's figures (plan/serve_search.py Option):
    its capacity per replica (a throughput), TTFT and TPOT p50/p99 (times), and the cost per
    million tokens, which scales as the whole replicas the rate needs at the capacity's bounds."""
    import math

    from gpucluster.model.intervals import serving_interval, serving_point

    point = serving_point(o.hardware, engine=engine, moe=moe)
    p = o.point
    cap = serving_interval(o.per_replica_rate, "throughput", point, rate=True)
    out = {"per_replica_rate": cap}
    for name, metric, value in (("ttft_p50_s", "ttft", p.ttft_p50), ("ttft_p99_s", "ttft", p.ttft_p99),
                                ("tpot_p50_s", "tpot", p.tpot_p50), ("tpot_p99_s", "tpot", p.tpot_p99)):
        if value is not None and value == value and value != float("inf"):
            out[name] = serving_interval(value, metric, point)  # type: ignore[arg-type]
    for name, own in (("usd_per_mtok", False), ("own_usd_per_mtok", True)):
        usd = o.usd_per_mtok(rate, output_tokens, own=own)
        if usd is not None and o.replicas:
            few, many = math.ceil(rate / cap.hi - 1e-9), math.ceil(rate / cap.lo - 1e-9)
            out[name] = replace(cap, point=usd, lo=usd * min(few, o.replicas) / o.replicas,
                                hi=usd * max(many, o.replicas) / o.replicas)
    return out
