"""Fractional-GPU bin packing and fragmentation gradient descent (FGD).

Both take jobs in arrival order and start every one that fits now (no head-of-line
blocking), as a Kubernetes scheduler with GPU sharing does:
* `binpack`: a GPU-sharing pod goes to the GPU with the least free share that fits
  (best fit); a whole-GPU gang to the fullest node that fits.
* `fgd`: each goes where the cluster's fragmentation against the workload grows
  least (Weng et al. ATC'23; see sim/fragmentation.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpucluster.sim.policies import policies
from gpucluster.sim.policies.base import Decision, Policy, View


class _Greedy(Policy):
    options_doc: ClassVar[dict[str, str]] = {"depth": "jobs examined per pass (default 1000)"}

    def schedule(self, view: View) -> list[Decision]:
        jobs = view.queue[:int(self.options.get("depth", 1000))]
        if not view.full:
            jobs = [j for j in jobs if j.id in view.new]
        return self.greedy(view, jobs, blocking=False)


@policies.register("binpack", "best-fit", "bin-packing")
class BinPack(_Greedy):
    name = "binpack"
    summary = "arrival order without blocking; best-fit GPU shares and nodes (bin packing)"


@policies.register("fgd", "fragmentation-gradient-descent")
class FragmentationGradient(_Greedy):
    name = "fgd"
    summary = "arrival order without blocking; place where fragmentation grows least (ATC'23 FGD)"
    placement = "fgd"
    share_placement = "fgd"

    def prepare(self, sim: Any) -> None:
        from gpucluster.sim.fragmentation import FragModel
        sim.frag = FragModel.from_jobs(sim.state, sim.jobs)
