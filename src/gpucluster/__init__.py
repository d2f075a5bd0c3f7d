"""gpucluster: design, simulate and validate GPU clusters for AI.

The Python API (docs/api.md); names load on first use, so `import gpucluster` stays instant:

    import gpucluster
    plan = gpucluster.plan_train("llama3-70b", gpu="H100:8", nodes=32, tokens="2T")
    cluster = gpucluster.load_cluster("examples/h200-256-ndr400.yaml")
    rows = gpucluster.validate("../shared/validation/training-public.yaml")
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# public name -> (module, attribute)
_API = {
    "plan_train": ("gpucluster.plan.train_request", "plan_train"),
    "TrainingPlan": ("gpucluster.plan.train_plan", "TrainingPlan"),
    "load_cluster": ("gpucluster.specs.cluster", "load_cluster"),
    "load_model": ("gpucluster.specs.workload", "load_model_spec"),
    "validate": ("gpucluster.validate.runner", "run_file"),
    "UserError": ("gpucluster.errors", "UserError"),
}
__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'gpucluster' has no attribute {name!r} (public: {', '.join(sorted(_API))})")
    module, attr = _API[name]
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value
