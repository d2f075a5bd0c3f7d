"""The transformer workload model: parameters, FLOPs, GEMMs and memory of a `TransformerSpec`.

Pure functions, no I/O. The work is split over three modules, all re-exported here:
- transformer_params: `params` (`Params`), `layout_problems` / `check_layout`, `stage_layer_counts`
- transformer_flops:  `model_flops_per_iteration`, `hardware_flops_per_iteration`,
                      `model_flops_per_token`, `layer_gemms`, `logit_gemm` (`Gemm`), `padded_vocab`
- transformer_memory: `weight_grad_optimizer_bytes`, `activation_bytes_per_layer`,
                      `activation_bytes_outside_layers`, `pipeline_inflight_microbatches`
Units: FLOPs are floating-point operations (not per second), memory is bytes, parameter
counts are numbers of parameters. Each module's docstring gives its formulas' sources.
"""

from gpucluster.model.transformer_flops import (Gemm, hardware_flops_per_iteration, layer_gemms, logit_gemm,
                                                model_flops_per_iteration, model_flops_per_token, padded_vocab)
from gpucluster.model.transformer_memory import (activation_bytes_outside_layers, activation_bytes_per_layer,
                                                 pipeline_inflight_microbatches, weight_grad_optimizer_bytes)
from gpucluster.model.transformer_params import (Params, check_layout, layout_problems, params,
                                                 stage_layer_counts)

__all__ = [
    "Gemm", "Params", "activation_bytes_outside_layers", "activation_bytes_per_layer", "check_layout",
    "hardware_flops_per_iteration", "layer_gemms", "layout_problems", "logit_gemm", "model_flops_per_iteration",
    "model_flops_per_token", "padded_vocab", "params", "pipeline_inflight_microbatches", "stage_layer_counts",
    "weight_grad_optimizer_bytes",
]
