"""What a measured figure counts: a field of the case (`training.flops_counted`), never its text.

"Model TFLOP/s per GPU" and MFU count the model's FLOPs per step, divided by time and GPU
count (and by the peak, for MFU). Sources differ on one point, whether the extra forward
pass of activation recompute is counted:

- `model`: it is not (Megatron-Core's num_floating_point_operations, NeMo, Megatron-Bridge,
  torchtitan, nanotron, the FlashAttention papers; shared/validation/README.md).
- `hardware`: it is. Megatron-LM's printed throughput and Narayanan et al. 2021's formula
  (96 B s l h^2 (1 + s/6h + V/16lh): four passes, the fourth the recompute) count it,
  as does Megatron-DeepSpeed's throughput_calculator (checkpoint_activations_factor 4).

Where a case does not state it, `default_flops_counted` decides from stated fields: a case
that states unfused attention and states its recompute dates from before FlashAttention (2022
or earlier), when the stacks' printed throughput (Megatron-LM, Megatron-DeepSpeed, Narayanan
et al. 2021) counted the recompute pass it ran: `hardware`. Every other case counts `model`
FLOPs, the definition shared/validation/README.md gives ("Notes on what the sources count");
a case that leaves its recompute to the planner cannot have counted one. The two
coincide where nothing is recomputed. Per GPU figures
(`tflops_per_gpu`, `tokens_per_s_per_gpu`) are per GPU by name; `iteration_s` is per step.
Nothing here reads `source` or `notes`.
"""

from __future__ import annotations

from typing import Literal, Protocol

FlopsCounted = Literal["model", "hardware"]


class _Estimate(Protocol):
    step_s: float

    @property
    def model_tflops_per_gpu(self) -> float: ...
    @property
    def hardware_tflops_per_gpu(self) -> float: ...
    @property
    def tokens_per_s_per_gpu(self) -> float: ...
    @property
    def mfu(self) -> float: ...
    @property
    def hfu(self) -> float: ...


def default_flops_counted(attention: str, recompute_stated: bool) -> FlopsCounted:
    """The FLOPs convention of a case that states none (see the module docstring)."""
    return "hardware" if attention == "unfused" and recompute_stated else "model"


def predicted_figures(est: _Estimate, counted: FlopsCounted) -> dict[str, float]:
    """The figures a case can measure, each counted as the case's source counts it."""
    hardware = counted == "hardware"
    return {"iteration_s": est.step_s,
            "tflops_per_gpu": est.hardware_tflops_per_gpu if hardware else est.model_tflops_per_gpu,
            "model_tflops_per_gpu": est.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": est.hardware_tflops_per_gpu,
            "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu, "mfu": est.hfu if hardware else est.mfu}


# Measured metrics that are times (a higher prediction is a slower one); every other metric a case
# may carry is a rate (throughput, TFLOP/s, MFU, bus bandwidth).
TIME_METRICS = frozenset({"iteration_s", "latency_s", "ttft_s", "tpot_s", "time_us"})


def speed_bias(metric: str, error: float) -> float:
    """How much faster the prediction is than the measurement (predicted speed / measured - 1;
    negative: slower), from a metric's error (predicted - measured) / measured: the same sign
    whether the case measured a time or a rate."""
    return 1 / (1 + error) - 1 if metric in TIME_METRICS else error


def compared_metric(metric: str) -> str:
    """The predicted figure a measured `metric` is compared with: the same name (the predictor
    has already applied the case's convention)."""
    return metric
