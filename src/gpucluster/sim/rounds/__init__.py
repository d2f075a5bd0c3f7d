"""Round-based, heterogeneity-aware scheduling as Gavel does it (Narayanan et al., OSDI'20).

A policy computes an allocation matrix X (jobs x GPU types): the fraction of wall time
each job should spend on each type (allocation.py, linear programs solved by scipy's
HiGHS, imported only when a policy runs). Time is cut into rounds (360 s by default);
at each round's start the mechanism (mechanism.py) gives GPUs to jobs in order of
priority = X / share of the time each job has received on that type since the
allocation last changed, skipping jobs whose gang no longer fits. X is recomputed when
the set of jobs changes (arrivals are admitted at round starts, as in Gavel).

Two drivers share the allocation and the mechanism: `engine.py` runs a trace over
numpy arrays (the benchmark, benchmarks/sim_gavel.py), `policy.py` is a policy of the
event-driven simulator (`gpucluster simulate`), with its checks, failures and metrics.
"""

from __future__ import annotations

from gpucluster.registry import Registry

allocators: Registry = Registry("allocation policy")


def load_all() -> Registry:
    from gpucluster.sim.rounds import allocation  # noqa: F401  (registers the policies)
    from gpucluster.sim.rounds import packing  # noqa: F401  (max_min_fairness_packed)
    return allocators
