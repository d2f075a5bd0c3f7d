"""Every Kubernetes core-API object `generate k8s` writes (the Job, its Service) is read by the
official kubernetes python client's models (issue 22): deserialized with
`ApiClient._ApiClient__deserialize` (what `ApiClient.deserialize` does with a response) into
`V1Job`, `V1Service`, ..., re-serialized with `sanitize_for_serialization`, and compared with the
generated object, so a field the models do not know (which the client drops silently) fails
here; the models' strict types (StrictInt, StrictStr: a quantity is a string) refuse a value of
the wrong type. Kueue's objects are custom resources, checked against Kueue's CRDs in
test_amd_k8s.py / test_kueue_labels.py: here every object is either core or a known CRD group."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip(
    "kubernetes", reason="the official kubernetes python client (the `test` extra) checks generated objects")
from kubernetes import client as k8s  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "documents"))

from doc_helpers import invoke, json_of  # noqa: E402

# Custom resource groups whose objects are validated against their own CRDs elsewhere.
CRD_GROUPS = {"kueue.x-k8s.io"}

PLANS = {
    "h100": ("--gpu", "H100:8", "--nodes", "2", "--model", "llama3-8b", "--tokens", "10B"),
    "mi300x": ("--gpu", "MI300X:8", "--nodes", "2", "--model", "llama3-8b", "--tokens", "10B"),
    "h100-cluster": ("--cluster", "examples/h100-64-ib.yaml", "--model", "llama2-13b", "--tokens", "100B",
                     "--layout", "tp=2,pp=2"),
}
VARIANTS = {
    "megatron": (),
    "no-queue-plain-args": ("--queue", "", "--args", "none", "--socket-ifname", "eth0"),
}


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory):
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            p = tmp_path_factory.mktemp("plans") / f"{name}.json"
            p.write_text(json.dumps(json_of("plan", "train", *PLANS[name], "--top", "1")))
            cache[name] = p
        return cache[name]
    return get


def _generated(plan: Path, *args: str) -> list[dict[str, Any]]:
    res = invoke("generate", "k8s", str(plan), *args)
    assert res.exit_code == 0, res.output
    return [d for d in yaml.safe_load_all(res.stdout) if d is not None]


def model_name(obj: dict[str, Any]) -> str | None:
    """The client's model class for a core-API object (batch/v1 Job -> V1Job); None for a CRD."""
    group, _, version = obj["apiVersion"].rpartition("/")
    if group in CRD_GROUPS:
        return None
    name = f"{version[:1].upper()}{version[1:]}{obj['kind']}"
    assert hasattr(k8s, name), f"{obj['apiVersion']} {obj['kind']}: no model {name} in the kubernetes client"
    return name


def round_trip(obj: dict[str, Any], klass: str) -> Any:
    api = k8s.ApiClient()
    model = api._ApiClient__deserialize(copy.deepcopy(obj), klass)  # type: ignore[attr-defined]
    assert type(model).__name__ == klass
    return api.sanitize_for_serialization(model)


def differences(generated: Any, back: Any, path: str = "") -> list[str]:
    """Where the re-serialized object differs from the generated one (a dropped field, a value
    the client changed)."""
    if isinstance(generated, dict) and isinstance(back, dict):
        out = [f"{path}.{k}: dropped by the client's models" for k in generated if k not in back]
        out += [f"{path}.{k}: added by the client" for k in back if k not in generated]
        for k in generated.keys() & back.keys():
            out += differences(generated[k], back[k], f"{path}.{k}")
        return out
    if isinstance(generated, list) and isinstance(back, list):
        if len(generated) != len(back):
            return [f"{path}: {len(generated)} items became {len(back)}"]
        return [d for i, (a, b) in enumerate(zip(generated, back, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    if generated == back and type(generated) is type(back):
        return []
    return [f"{path}: {generated!r} became {back!r}"]


def check_core(obj: dict[str, Any]) -> str | None:
    name = model_name(obj)
    if name is None:
        return None
    where = f"{obj['kind']} {obj['metadata']['name']}"
    diff = differences(obj, round_trip(obj, name), where)
    assert not diff, diff
    return obj["kind"]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("plan", list(PLANS))
def test_every_generated_core_object_round_trips_through_the_client_models(plan: str, variant: str,
                                                                            plan_file) -> None:
    objects = _generated(plan_file(plan), *VARIANTS[variant])
    kinds = {check_core(o) for o in objects} - {None}
    assert kinds == {"Job", "Service"}
    job = next(o for o in objects if o["kind"] == "Job")
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert set(resources) == {"amd.com/gpu" if plan == "mi300x" else "nvidia.com/gpu"}


def test_kueue_objects_are_custom_resources_of_a_known_group() -> None:
    res = invoke("generate", "kueue", "examples/mixed-h100-h200-mi300x.yaml")
    assert res.exit_code == 0, res.output
    objects = [d for d in yaml.safe_load_all(res.stdout) if d is not None]
    assert objects and all(check_core(o) is None for o in objects)


def test_the_checks_catch_a_dropped_field_and_a_wrong_type(plan_file) -> None:
    from pydantic import ValidationError

    job = next(o for o in _generated(plan_file("h100")) if o["kind"] == "Job")
    bad = copy.deepcopy(job)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"   # a typo the client drops
    assert differences(bad, round_trip(bad, "V1Job")) == [
        ".spec.template.spec.containers[0].imagePullPolicyy: dropped by the client's models"]
    wrong = copy.deepcopy(job)
    wrong["spec"]["completions"] = str(job["spec"]["completions"])
    with pytest.raises(ValidationError, match="completions"):
        round_trip(wrong, "V1Job")
    wrong = copy.deepcopy(job)
    wrong["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    with pytest.raises(ValidationError, match=r"nvidia\.com/gpu"):
        round_trip(wrong, "V1Job")
