"""A board power limit below the chip's TDP, and the sustained clock it leaves for compute.

Under a power cap the GPU's DVFS governor lowers the SM clock until board power fits. Dynamic
power goes as C V^2 f and, in the DVFS range, V roughly with f, so dynamic power ~ f^3; a share
of the board's power does not scale with the SM clock (leakage, HBM, fans-off board losses,
NVLink/IO). So at full compute load

    P(f) / TDP = static + (1 - static) (f / f_max)^3   =>   f / f_max = ((cap/TDP - static) / (1 - static))^(1/3)

Compute-bound kernels (GEMMs, fused attention) slow by f/f_max; memory-bound ones keep the HBM clock
and do not. The relation is an estimate: it is the standard cubic DVFS model (Mei, Wang & Chu 2017,
"A survey and measurement study of GPU DVFS on energy conservation", Digital Communications and
Networks 3(2); Tang et al. 2019, "The impact of GPU DVFS on the energy and performance of deep
learning", ACM e-Energy) with STATIC_SHARE from the same measurements (30-40% of board power does not
follow the SM clock); power-capping studies of training fleets (Zhao et al. 2023, "Sustainable
supercomputing for AI: GPU power capping at HPC scale", ACM SoCC) report the sub-linear slowdown it
gives (a cap at ~60-70% of TDP costs a few to ~15% of training throughput). No measured
clock-versus-cap curve is shipped, so every capped figure says it rests on this estimate.
"""

from __future__ import annotations

from functools import cache

from gpucluster.catalog import catalog

STATIC_SHARE = 0.35      # board power that does not follow the SM clock (estimate; see above)
def clock_for(cap_fraction: float) -> float:
    """Sustained SM clock over the uncapped one, for a cap at this fraction of TDP (1: no cap)."""
    if cap_fraction >= 1.0:
        return 1.0
    dynamic = (cap_fraction - STATIC_SHARE) / (1.0 - STATIC_SHARE)
    # Below the static share the model has no answer; the driver's minimum cap keeps inputs above it,
    # and the floor keeps a clock positive for the smallest accepted caps.
    return max(dynamic, 0.05) ** (1.0 / 3.0)


@cache
def clock_fraction(gpu_name: str) -> tuple[float, str]:
    """(f / f_max, where it comes from) for a catalog GPU, capped or not."""
    gpu = catalog.gpus.get(gpu_name)
    if gpu.power_cap_w is None or gpu.power_cap_w.value >= gpu.tdp_w.value:
        return 1.0, ""
    frac = gpu.power_cap_w.value / gpu.tdp_w.value
    f = clock_for(frac)
    return f, (f"power cap {gpu.power_cap_w.value:g} W of {gpu.tdp_w.value:g} W TDP: compute clock x {f:.3f} "
               f"(cubic DVFS relation, static share {STATIC_SHARE:g}; estimate)")
