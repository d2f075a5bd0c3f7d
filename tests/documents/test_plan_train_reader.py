"""The plan document has one model (documents/plan_train.py); `generate` reads it through a
stricter view (generate/plan_schema.py). Every field that view reads is a field of the document,
under the same name, and a plan as printed passes it."""

from __future__ import annotations

import typing

from doc_helpers import json_of
from pydantic import BaseModel

from gpucluster.documents.plan_train import Layout, PlanTrainDocument
from gpucluster.generate.plan_schema import PlanDoc, PlanLayout, validate_plan


def _submodel(annotation: typing.Any) -> type[BaseModel] | None:
    for t in (annotation, *typing.get_args(annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        out.add(prefix + key)
        sub = _submodel(info.annotation)
        if sub is not None:
            out |= _paths(sub, f"{prefix}{key}.")
    return out


def test_every_field_the_generators_read_is_a_document_field():
    assert _paths(PlanDoc) <= _paths(PlanTrainDocument)


def test_the_layout_keys_agree():
    assert set(PlanLayout.model_fields) <= set(Layout.model_fields)
    for name, info in PlanLayout.model_fields.items():
        doc = Layout.model_fields[name]
        assert info.is_required() == doc.is_required(), name
        if not info.is_required():      # a key a plan may leave out means the same to both
            assert doc.default == info.default, name


def test_a_printed_plan_passes_the_generators_view():
    doc = json_of("plan", "train", "--gpu", "H100:8", "--nodes", "2", "--model", "llama2-7b", "--tokens", "10B")
    plan = validate_plan(doc, "<plan>")
    assert plan.best.layout.tp == doc["best"]["layout"]["tp"] and plan.target.nodes == 2
