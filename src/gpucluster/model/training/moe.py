"""Expert-parallel communication of one MoE layer: dispatch tokens to their experts, combine results.

Two dispatchers, a setting of the stack (`Layout.moe_dispatcher`):

- `alltoall` (Megatron-Core's default token dispatcher): one NCCL all-to-all in each
  direction; every routed copy of a token (top-k of them) is its own message, and the
  copies addressed to GPUs in other scale-up domains cross the network.
- `deepep` (DeepSeek's DeepEP, Megatron-Core's flex dispatcher; DeepSeek-V3 report section
  3.2.2): a token crosses the network once per destination node and is forwarded to its
  experts there over NVLink. With uniform routing over D domains a token's k experts lie
  on D(1 - (1 - 1/D)^k) of them; node-limited routing (`moe_max_nodes`, DeepSeek-V3: 4)
  caps that.

Dispatch moves activations in the layer's activation dtype (2 bytes) or in FP8 when the
stack quantizes them before sending (`moe_fp8_dispatch`, DeepSeek-V3); combine returns
2-byte results. The busiest link sets the pace; NVLink and the NICs run at once.
"""

from __future__ import annotations

import math

from gpucluster.model.collectives import transfer_time_s
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.model.training.layout import Layout
from gpucluster.specs.workload import TransformerSpec

ACT_BYTES = 2


def remote_domains_per_token(spec: TransformerSpec, domains: int) -> float:
    """Other scale-up domains one token's routed experts lie on (uniform routing, node limit)."""
    if domains <= 1:
        return 0.0
    k = spec.experts_per_token
    hit = domains * (1 - (1 - 1 / domains) ** k)          # distinct domains, own one included
    if spec.moe_max_nodes:
        hit = min(hit, spec.moe_max_nodes)
    return hit * (domains - 1) / domains


def dispatch_combine_s(spec: TransformerSpec, lay: Layout, fab: TrainingFabric, tokens: float) -> float:
    """Seconds of one forward dispatch plus combine on one GPU (`tokens`: the GPU's tokens)."""
    if lay.ep <= 1:
        return 0.0
    local = tokens / (lay.tp if lay.sequence_parallel else 1)
    k, h = spec.experts_per_token, spec.hidden
    # Megatron-Core's expert rank order (etp-ep-dp): EP neighbours are expert-TP ranks apart.
    stride = lay.expert_tp
    out_bytes = 1 if lay.moe_fp8_dispatch else ACT_BYTES
    if lay.moe_dispatcher == "alltoall":
        return (fab.time_s("all_to_all", local * k * h * out_bytes, lay.ep, stride)
                + fab.time_s("all_to_all", local * k * h * ACT_BYTES, lay.ep, stride))
    group = fab.group(lay.ep, stride)
    remote = remote_domains_per_token(spec, group.domains)
    total = 0.0
    for nbytes in (out_bytes, ACT_BYTES):
        t_up = transfer_time_s(local * k * h * nbytes * (group.per_domain - 1) / max(group.per_domain, 1),
                               local * h * nbytes, group.scale_up_gbps, group.scale_up.ramp())
        t = float(t_up)
        if group.domains > 1 and group.scale_out is not None:
            # NVLink also forwards what arrives from the network to the experts' GPUs.
            t_out = transfer_time_s(local * remote * h * nbytes, local * h * nbytes, group.scale_out_gbps,
                                    group.scale_out.ramp())
            t = max(t, float(t_out))
            t += (group.scale_out.link.base_latency_us.value + group.scale_out.link.hop_latency_us.value) * 1e-6
        total += t + group.scale_up.link.base_latency_us.value * 1e-6
    return total


# The busiest expert rank's routed tokens over the mean, for a run that does not state it. Token-choice
# routing with load balancing is never exactly even per step: DeepSeek's study of balancing strategies
# (Wang et al. 2024, "Auxiliary-loss-free load balancing strategy for mixture-of-experts", arXiv
# 2408.15664, Table 1) measures the most loaded expert at 1.04x the mean with their loss-free balancer
# and 1.5-1.7x with an auxiliary loss (MaxVio_global 0.04 and 0.52-0.72, 1B-3B models). An EP rank
# pools experts/ep experts, which evens it out; 1.1 (an estimate between the two) is the default,
# said so in the plan. Layout.moe_imbalance (a user's figure) overrides it.
DEFAULT_MOE_IMBALANCE = 1.1
DEFAULT_MOE_IMBALANCE_SOURCE = ("expert load imbalance not stated: busiest expert rank at 1.1x the mean "
                                "(estimate from Wang et al. 2024, arXiv 2408.15664)")


def expert_imbalance(lay: Layout) -> float:
    """The busiest expert rank's tokens over the mean (1: perfectly balanced routing). A layout whose
    moe_imbalance is None (not stated) gets DEFAULT_MOE_IMBALANCE."""
    value = getattr(lay, "moe_imbalance", None)
    if value is None:
        return DEFAULT_MOE_IMBALANCE
    return max(1.0, value) if math.isfinite(value) else 1.0
