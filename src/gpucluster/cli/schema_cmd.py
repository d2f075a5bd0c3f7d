"""`gpucluster schema KIND`: JSON Schema of the spec files, for editors."""

from __future__ import annotations

from typing import Annotated

import typer

SCHEMAS = ("cluster", "validation")


def schema(kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(SCHEMAS)}")]) -> None:
    """Print the JSON Schema of a spec file (point your editor's YAML plugin at it)."""
    from gpucluster.cli.render import print_json
    from gpucluster.errors import unknown_name

    if kind == "cluster":
        from gpucluster.specs.cluster import ClusterSpec
        print_json(ClusterSpec.model_json_schema())
    elif kind == "validation":
        from gpucluster.specs.validation_case import ValidationFile
        print_json(ValidationFile.model_json_schema(by_alias=True))
    else:
        raise unknown_name("schema", kind, SCHEMAS, field="KIND")
