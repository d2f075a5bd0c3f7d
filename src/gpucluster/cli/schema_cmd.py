"""`gpucluster schema KIND`: JSON Schema of the spec files (for editors) and of every `--json`
document (for consumers); `--list` names them all."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

# Each spec-file kind: (module, model class); imported only when asked for.
_MODELS = {
    "cluster": ("gpucluster.specs.cluster", "ClusterSpec"),
    "model": ("gpucluster.specs.workload", "TransformerSpec"),
    "scenario": ("gpucluster.specs.scenario", "Scenario"),
    "validation": ("gpucluster.specs.validation_case", "ValidationFile"),
}
SCHEMAS = tuple(_MODELS)
# The output documents (gpucluster-NAME/v1) by NAME: kept in step with documents.DOCUMENTS by
# tests/documents/test_schema_export.py, and listed here so that --help imports nothing.
DOCUMENTS = ("plan-train", "plan-serve", "simulation", "simulation-compare", "validate", "check", "cost", "facility",
             "reliability", "topology", "comm", "advise", "diagnose", "sweep", "bench-collective", "bench-gemm",
             "bench-hbm", "bench-storage")


def schema(
    kind: Annotated[Optional[str], typer.Argument(
        help=f"A spec file ({', '.join(SCHEMAS)}) or a --json document ({', '.join(DOCUMENTS)})",
        show_default=False)] = None,
    list_: Annotated[bool, typer.Option("--list", help="List every schema: spec files and --json documents")] = False,
) -> None:
    """Print the JSON Schema of a spec file (point your editor's YAML plugin at it).

    Also of every command's --json document (gpucluster-NAME/v1), for what reads them."""
    from gpucluster.cli.render import console, print_json, safe
    from gpucluster.errors import UserError

    if list_:
        for name in SCHEMAS:
            console.print(f"{name:20} spec file ({safe(_MODELS[name][1])})")
        for name in DOCUMENTS:
            console.print(f"{name:20} --json document gpucluster-{name}/v1")
        return
    if kind is None:
        raise UserError(f"give a KIND (spec files: {', '.join(SCHEMAS)}; documents: {', '.join(DOCUMENTS)}), "
                        "or --list", field="KIND")
    print_json(schema_of(kind))


def schema_of(kind: str) -> dict:
    """The JSON Schema (draft 2020-12) of a spec file or a --json document, by name."""
    import importlib

    from gpucluster.errors import unknown_name

    if kind in _MODELS:
        module, name = _MODELS[kind]
        return getattr(importlib.import_module(module), name).model_json_schema(by_alias=True)
    name = kind.removeprefix("gpucluster-").removesuffix("/v1")
    if name in DOCUMENTS:
        from gpucluster.documents import model_of, schema_id
        out = model_of(name).model_json_schema(by_alias=True)
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": schema_id(name), **out}
    raise unknown_name("schema", kind, SCHEMAS + DOCUMENTS, field="KIND")
