"""Scheduling policies, one module each, in one registry (an unknown name lists the valid ones)."""

from __future__ import annotations

from gpucluster.registry import Registry

policies: Registry = Registry("policy")


def load_all() -> Registry:
    """Import every policy module (each registers itself) and return the registry."""
    from gpucluster.sim.policies import (  # noqa: F401
        backfill,
        binpack,
        fifo,
        hetero,
        kueue,
        las,
        multifactor,
        partition,
        sjf,
        topo,
    )
    from gpucluster.sim.rounds import policy as _rounds  # noqa: F401  (Gavel's round-based policies)
    return policies
