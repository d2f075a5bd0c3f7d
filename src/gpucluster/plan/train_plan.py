"""A training plan: the best layouts for a model on a cluster, and what the run costs in time and GPU-hours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucluster.errors import UserError
from gpucluster.model.training import frameworks
from gpucluster.model.training.layout import Layout, problems
from gpucluster.model.training.step import Estimate, estimate
from gpucluster.model.transformer_flops import model_flops_per_iteration
from gpucluster.model.transformer_params import params
from gpucluster.plan.advise import Advice, advise
from gpucluster.plan.confidence import Confidence, confidence
from gpucluster.plan.fabric_from import PlanTarget
from gpucluster.plan.train_search import SEARCHED, SearchResult, search
from gpucluster.specs.workload import TransformerSpec

if TYPE_CHECKING:
    from gpucluster.plan.train_goodput import WithFailures

FULL_LAYOUT = {"tp", "pp", "dp", "cp", "ep", "interleave", "micro_batch", "recompute", "zero"}
# The defaults of `gpucluster plan train` (plan/train_request.py, plan/run_estimates.py): Llama 2/3
# trained with about 4M tokens per optimizer step; Chinchilla (Hoffmann et al. 2022): ~20 tokens
# per parameter.
DEFAULT_BATCH_TOKENS = 4 * 2**20
CHINCHILLA_TOKENS_PER_PARAM = 20


@dataclass
class TrainingPlan:
    spec: TransformerSpec
    target: PlanTarget
    seq_len: int
    global_batch: int
    tokens: int
    search: SearchResult
    advice: Advice
    tokens_source: str = "given"          # where the token budget comes from
    global_batch_source: str = "given"    # where the global batch comes from
    fixed: dict[str, Any] = field(default_factory=dict)   # the layout fields and stack settings the user fixed
    tp_across_domains: bool = False
    # The run with failures, restarts and checkpoint writes (plan/train_goodput.py); `plan_train` sets it.
    with_failures: WithFailures | None = None

    @property
    def params(self) -> int:
        return params(self.spec).total

    def meta(self) -> dict[str, Any]:
        """What the renderers print beside the plan."""
        fw = self.fixed.get("framework")
        return {"tokens_source": self.tokens_source, "global_batch_source": self.global_batch_source,
                "params": self.params,
                "framework": fw or f"{frameworks.DEFAULT_FRAMEWORK} (default; --framework)",
                "framework_summary": frameworks.get(fw or frameworks.DEFAULT_FRAMEWORK).summary()}

    @property
    def best(self) -> Estimate:
        assert self.search.best is not None
        return self.search.best

    @property
    def confidence(self) -> Confidence:
        return confidence(self.target.fabric.gpu_name, self.best.layout, self.best.mfu, moe=self.spec.is_moe)

    @property
    def steps(self) -> float:
        return self.tokens / (self.global_batch * self.seq_len)

    @property
    def time_to_train_s(self) -> float:
        return self.steps * self.best.step_s

    @property
    def gpu_hours(self) -> float:
        return self.time_to_train_s * self.target.gpus / 3600

    @property
    def total_model_flops(self) -> float:
        """Megatron's count for the whole token budget."""
        return model_flops_per_iteration(self.spec, 1, self.seq_len) / self.seq_len * self.tokens

    @property
    def six_nd(self) -> float:
        """The 6 x parameters x tokens rule of thumb (Kaplan et al. 2020), active parameters for MoE."""
        return 6 * params(self.spec).active * self.tokens

    @property
    def one_gpu_s(self) -> float:
        """The same run on one GPU at this plan's per-GPU throughput (if one GPU could hold it)."""
        return self.tokens / self.best.tokens_per_s_per_gpu

    def rental(self) -> tuple[float, str] | None:
        """Price per GPU-hour and its source: the cluster file's, else the catalog's (as `cost` does)."""
        if self.target.usd_per_gpu_hour is not None:
            return self.target.usd_per_gpu_hour
        gpu = self.target.fabric.gpu
        price = gpu.prices.rental_usd_per_gpu_hour
        if price is None:
            return None
        src = gpu.sources[price.source]
        return price.value, f"{src.title} ({src.date})"


TRAIN_PRECISIONS = ("bf16", "fp16", "fp8")


def require_precision(gpu: Any, precision: str, field: str = "--precision") -> None:
    """One line naming the GPU, the precision and the ones it has, when the catalog lacks it."""
    if precision in gpu.peak_tflops:
        return
    has = list(gpu.peak_tflops)
    usable = [p for p in TRAIN_PRECISIONS if p in has]
    hint = (f"use --precision {' or '.join(usable)}" if usable else
            f"the planner trains in {', '.join(TRAIN_PRECISIONS)} only, none of which this GPU has")
    raise UserError(f"{gpu.name} has no {precision} (it has: {', '.join(has)}); {hint}", field=field)


def plan_training(spec: TransformerSpec, target: PlanTarget, global_batch: int, tokens: int, seq_len: int, *,
                  fixed: dict[str, Any] | None = None, top: int = 5, precision: str = "bf16",
                  tp_across_domains: bool = False) -> TrainingPlan:
    fixed = dict(fixed or {})
    fixed.setdefault("precision", precision)
    require_precision(target.fabric.gpu, fixed["precision"])
    if not spec.is_moe:
        fixed.setdefault("ep", 1)   # a dense model has no expert parallelism to choose
    try:
        frameworks.get(fixed.get("framework", frameworks.DEFAULT_FRAMEWORK))
    except ValueError as exc:
        raise UserError(str(exc), field="--framework") from None
    if FULL_LAYOUT <= fixed.keys():
        res = _explicit(spec, target, global_batch, seq_len, fixed)
    else:
        res = search(spec, target.fabric, target.gpus, global_batch, fixed=fixed, seq_len=seq_len, top=top,
                     tp_across_domains=tp_across_domains, precision=precision)
        if res.best is None:
            raise _nothing_fits(spec, target, global_batch, seq_len, fixed, res)
    best = res.ranked[0]
    return TrainingPlan(spec, target, seq_len, global_batch, tokens, res, advise(spec, best, target, seq_len))


def _explicit(spec: TransformerSpec, target: PlanTarget, gbs: int, seq_len: int, fixed: dict[str, Any]) -> SearchResult:
    lay = Layout(global_batch=gbs, **{k: v for k, v in fixed.items() if k in Layout.__dataclass_fields__})
    if "sequence_parallel" not in fixed:
        lay = lay.with_(sequence_parallel=lay.tp > 1)
    why = problems(spec, lay, target.gpus, seq_len)
    if why:
        raise UserError(why[0], field="--layout")
    est = estimate(spec, lay, target.fabric, seq_len=seq_len)
    if not est.memory.fits:
        hint = _smallest_fix(spec, target, gbs, seq_len, fixed)
        mem = ", ".join(f"{k} {v / 2**30:.1f}" for k, v in est.memory.rows())
        raise UserError(f"{lay.short()} needs {est.memory.total / 2**30:.1f} GiB per GPU but "
                        f"{target.fabric.gpu_name} has {est.memory.capacity / 2**30:.1f} (GiB: {mem}); {hint}",
                        field="--layout")
    return SearchResult([est], considered=1, estimated=1)


def _smallest_fix(spec: TransformerSpec, target: PlanTarget, gbs: int, seq_len: int, fixed: dict[str, Any]) -> str:
    """Free one fixed dimension at a time, cheapest first, and report the first that fits."""
    for key in ("recompute", "zero", "micro_batch", "offload_optimizer", "interleave", "pp", "tp", "cp"):
        if key not in fixed:
            continue
        rest = {k: v for k, v in fixed.items() if k != key and k not in ("dp",)}
        res = search(spec, target.fabric, target.gpus, gbs, fixed=rest, seq_len=seq_len, top=1)
        if res.best is not None:
            return f"smallest change that fits: {key}={getattr(res.best.layout, key)} (instead of {fixed[key]})"
    return "no single change makes it fit: drop --layout to search"


def _nothing_fits(spec: TransformerSpec, target: PlanTarget, gbs: int, seq_len: int, fixed: dict[str, Any],
                  res: SearchResult) -> UserError:
    gpu = target.fabric.gpu
    if res.smallest_misfit is None:
        reason = res.rejected.most_common(1)[0][0] if res.rejected else "no layout matches the fixed fields"
        return UserError(f"no valid layout for {target.gpus} GPUs with {fixed or 'no fixed fields'}: {reason}",
                         field="--layout" if fixed else None)
    need = res.smallest_misfit.memory.total
    more = 2
    while more <= 64:
        bigger = PlanTarget(target.fabric, target.gpus * more, target.nodes * more, target.description)
        r = search(spec, bigger.fabric, bigger.gpus, gbs * more, fixed={
            k: v for k, v in fixed.items() if k not in ("dp",)}, seq_len=seq_len, top=1)
        if r.best is not None:
            break
        more *= 2
    tail = (f"{target.gpus * more} x {gpu.name} would fit ({r.best.layout.short()})" if r.best is not None
            else "even 64x more GPUs do not fit: a smaller model or sequence")
    return UserError(f"{spec.name or 'the model'} fits on no layout of {target.gpus} x {gpu.name} "
                     f"({gpu.hbm_bytes / 2**30:.0f} GiB each): the leanest layout tried "
                     f"({res.smallest_misfit.layout.short()}) needs {need / 2**30:.0f} GiB per GPU, "
                     f"with ZeRO-3, full recompute and optimizer offload considered; {tail}")


__all__ = ["SEARCHED", "TrainingPlan", "plan_training"]
