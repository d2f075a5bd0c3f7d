"""gpucluster: design, simulate and validate GPU clusters for AI.

The Python API (docs/api.md); names load on first use, so `import gpucluster` stays instant:

    import gpucluster
    plan = gpucluster.plan_train("llama3-70b", gpu="H100:8", nodes=32, tokens="2T")
    serve = gpucluster.plan_serve("llama3-70b", rate=1000, gpu="H100:8", slo_ttft="500ms")
    run = gpucluster.simulate("examples/scenarios/shared-vs-partitioned.yaml", policy="backfill")
    report = gpucluster.check("examples/h200-256-100gbe.yaml", jobs=["examples/jobs/seed-train-70b.sbatch"])
    cluster = gpucluster.load_cluster("examples/h200-256-ndr400.yaml")
    rows = gpucluster.validate("validation/training-llama3-meta.yaml")
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# public name -> (module, attribute)
_API = {
    "plan_train": ("gpucluster.plan.train_request", "plan_train"),
    "TrainingPlan": ("gpucluster.plan.train_plan", "TrainingPlan"),
    "plan_serve": ("gpucluster.plan.serve_request", "plan_serve"),
    "ServePlan": ("gpucluster.plan.serve_request", "ServePlan"),
    "simulate": ("gpucluster.sim.request", "simulate"),
    "SimulationRun": ("gpucluster.sim.request", "SimulationRun"),
    "check": ("gpucluster.check.request", "check"),
    "CheckReport": ("gpucluster.check.request", "CheckReport"),
    "document_model": ("gpucluster.documents", "model_of"),
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
