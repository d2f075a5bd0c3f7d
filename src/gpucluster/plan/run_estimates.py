"""Shared glue: the training plan, reliability plan and cost of one training run on a cluster,
with the same defaults as `gpucluster plan train` (Chinchilla tokens, ~4M-token batches)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucluster.model.cost import run_cost_usd
from gpucluster.model.transformer_params import params
from gpucluster.plan.fabric_from import PlanTarget
from gpucluster.plan.reliability_plan import ReliabilityPlan, reliability_plan
from gpucluster.plan.train_plan import CHINCHILLA_TOKENS_PER_PARAM, DEFAULT_BATCH_TOKENS, TrainingPlan, plan_training
from gpucluster.plan.train_search import training_precision
from gpucluster.specs.workload import TransformerSpec

if TYPE_CHECKING:  # annotations only: the cluster spec models stay off `plan train --gpu`'s start-up
    from gpucluster.specs.cluster import ClusterSpec


def default_tokens(model: TransformerSpec) -> int:
    return int(CHINCHILLA_TOKENS_PER_PARAM * params(model).active)


def default_global_batch(model: TransformerSpec, seq_len: int | None = None) -> int:
    return max(1, round(DEFAULT_BATCH_TOKENS / (seq_len or model.seq_len)))


def train(model: TransformerSpec, target: PlanTarget, tokens: int | None = None, precision: str | None = None,
          top: int = 1) -> TrainingPlan:
    """precision None: the GPU's own training precision (bf16, else fp16 on V100/P100/T4)."""
    s = model.seq_len
    precision = precision or training_precision(target.fabric.gpu)
    return plan_training(model, target, default_global_batch(model, s), tokens or default_tokens(model), s, top=top,
                         precision=precision)


@dataclass
class RunEstimate:
    training: TrainingPlan
    reliability: ReliabilityPlan

    @property
    def goodput(self) -> float:
        return self.reliability.best.optimal.goodput

    @property
    def wall_s(self) -> float:
        """Time to train including checkpoints, failures and restarts."""
        return self.training.time_to_train_s / self.goodput

    @property
    def gpu_hours(self) -> float:
        return self.training.gpu_hours / self.goodput

    def cost_usd(self, usd_per_gpu_hour: float) -> float:
        return run_cost_usd(self.training.gpu_hours, usd_per_gpu_hour, self.goodput)


def estimate_run(spec: ClusterSpec, target: PlanTarget, model: TransformerSpec, tokens: int | None = None, *,
                 profile: str = "llama3", precision: str | None = None) -> RunEstimate:
    precision = precision or training_precision(target.fabric.gpu)
    plan = train(model, target, tokens, precision)
    rel = reliability_plan(spec, model, profile=profile, nodes=target.nodes, precision=precision)
    return RunEstimate(plan, rel)
