"""`gpucluster schema KIND`: JSON Schema of the spec files, for editors."""

from __future__ import annotations

from typing import Annotated

import typer

# Each kind: (module, model class); imported only when asked for.
_MODELS = {
    "cluster": ("gpucluster.specs.cluster", "ClusterSpec"),
    "model": ("gpucluster.specs.workload", "TransformerSpec"),
    "scenario": ("gpucluster.specs.scenario", "Scenario"),
    "validation": ("gpucluster.specs.validation_case", "ValidationFile"),
}
SCHEMAS = tuple(_MODELS)


def schema(kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(SCHEMAS)}")]) -> None:
    """Print the JSON Schema of a spec file (point your editor's YAML plugin at it)."""
    from gpucluster.cli.render import print_json
    from gpucluster.errors import unknown_name

    import importlib

    if kind not in _MODELS:
        raise unknown_name("schema", kind, SCHEMAS, field="KIND")
    module, name = _MODELS[kind]
    print_json(getattr(importlib.import_module(module), name).model_json_schema(by_alias=True))
