"""The `--json` documents as pydantic models, one module per family; each model's first field is
its schema version (`gpucluster-NAME/vN`). `gpucluster schema NAME` prints their JSON Schema.

Models are imported on first use (`model_of`), so a command that prints no JSON loads none."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from gpucluster.api_args import DOCUMENT_NAME, checked
from gpucluster.errors import unknown_name

# schema name (gpucluster-NAME/v1) -> (module, class)
DOCUMENTS: dict[str, tuple[str, str]] = {
    "plan-train": ("plan_train", "PlanTrainDocument"),
    "plan-serve": ("plan_serve", "PlanServeDocument"),
    "simulation": ("simulation", "SimulationDocument"),
    "simulation-compare": ("simulation", "SimulationCompareDocument"),
    "validate": ("validation", "ValidateDocument"),
    "check": ("check", "CheckDocument"),
    "cost": ("cost", "CostDocument"),
    "facility": ("facility", "FacilityDocument"),
    "reliability": ("reliability", "ReliabilityDocument"),
    "topology": ("topology", "TopologyDocument"),
    "comm": ("comm", "CommDocument"),
    "advise": ("advise", "AdviseDocument"),
    "diagnose": ("diagnose", "DiagnoseDocument"),
    "sweep": ("sweep", "SweepDocument"),
    "bench-collective": ("bench", "BenchCollectiveDocument"),
    "bench-gemm": ("bench", "BenchGemmDocument"),
    "bench-hbm": ("bench", "BenchHbmDocument"),
    "bench-storage": ("bench", "BenchStorageDocument"),
}


def schema_id(name: str) -> str:
    return f"gpucluster-{name}/v1"


@checked(DOCUMENT_NAME)
def model_of(name: str) -> Any:
    """The model class of document NAME (`plan-train`, ...)."""
    if name not in DOCUMENTS:
        raise unknown_name("document", name, DOCUMENTS, field="name")
    module, cls = DOCUMENTS[name]
    return getattr(import_module(f"gpucluster.documents.{module}"), cls)


def model_for_schema(schema: str) -> Any | None:
    """The model of a document by its `schema` value, or None for one this version does not know."""
    for name in DOCUMENTS:
        if schema_id(name) == schema:
            return model_of(name)
    return None


def dump(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` built as the model of document NAME and dumped as `--json` prints it. A key the
    model does not know, or a value of the wrong type, is a bug here, not bad input: it raises."""
    return model_of(name).model_validate(data).dump()


def parse(name: str, data: dict[str, Any]) -> Any:
    """`data` as the typed model of document NAME (what the HTML reports read)."""
    return model_of(name).model_validate(data)
