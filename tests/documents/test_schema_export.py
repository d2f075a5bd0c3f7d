"""`gpucluster schema NAME` exports every document's JSON Schema, and --list names them."""

from __future__ import annotations

import json

import pytest
from doc_helpers import invoke

from gpucluster.cli import schema_cmd
from gpucluster.documents import DOCUMENTS, schema_id

jsonschema = pytest.importorskip("jsonschema")


def test_the_cli_list_is_the_registry():
    assert set(schema_cmd.DOCUMENTS) == set(DOCUMENTS)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_each_document_schema_is_valid_json_schema(name):
    res = invoke("schema", name)
    assert res.exit_code == 0, res.output
    schema = json.loads(res.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == schema_id(name)
    assert schema["properties"]["schema"]["const"] == schema_id(name)
    assert json.loads(invoke("schema", schema_id(name)).stdout) == schema


def test_list_names_spec_files_and_documents():
    out = invoke("schema", "--list").stdout
    for name in (*schema_cmd.SCHEMAS, *DOCUMENTS):
        assert name in out


def test_unknown_and_missing_kind_are_user_errors():
    from gpucluster.errors import UserError
    with pytest.raises(UserError, match="did you mean plan-train"):
        invoke("schema", "plan-trian")
    with pytest.raises(UserError, match="--list"):
        invoke("schema")
