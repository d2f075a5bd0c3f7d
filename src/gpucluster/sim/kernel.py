"""The event kernel lives in `gpucluster.events`, a leaf module: the simulator and the serving
model's batcher (gpucluster.model.serving.batcher_sim) both run on it; kept for existing imports."""

from gpucluster.events import Handler, Kernel

__all__ = ["Handler", "Kernel"]
