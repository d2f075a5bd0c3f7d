"""Kueue objects select nodes by the labels the vendors' node labellers really write, can be told
other labels, and use the served API version (issue 13)."""

import pytest
import yaml
from tests_cli_helpers import ROOT, assert_one_line_error, run

MIXED = "examples/mixed-h100-h200-mi300x.yaml"


def _flavors(objs):
    return {o["metadata"]["annotations"]["gpucluster.io/name"]: o for o in objs if o["kind"] == "ResourceFlavor"}


def _spec():
    from gpucluster.specs.cluster import load_cluster
    return load_cluster(str(ROOT / MIXED))


def test_gpu_feature_discovery_labels():
    from gpucluster.generate.kueue import kueue_objects
    flavors = _flavors(kueue_objects(_spec()))
    assert flavors["h100"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert flavors["h200"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert flavors["mi300x"]["spec"]["nodeLabels"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}


def test_every_catalog_gpu_has_a_node_label():
    """A GPU added to the catalog needs its labeller value here, or `generate kueue` refuses it."""
    from gpucluster.catalog import catalog
    from gpucluster.generate.kueue import GPU_NODE_LABELS
    for name in catalog.gpus.names():
        key, value = GPU_NODE_LABELS[name]
        vendor = catalog.gpus.get(name).vendor
        assert key == ("amd.com/gpu.product-name" if vendor == "amd" else "nvidia.com/gpu.product"), name
        assert " " not in value and len(value) <= 63


def test_node_label_override_for_all_pools_and_one():
    from gpucluster.generate.kueue import kueue_objects
    flavors = _flavors(kueue_objects(_spec(), node_labels=["node.kubernetes.io/instance-type=p5.48xlarge",
                                                           "mi300x:amd.com/gpu.product-name=AMD_Instinct_MI300X"]))
    assert flavors["h100"]["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert flavors["mi300x"]["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "p5.48xlarge",
                                                       "amd.com/gpu.product-name": "AMD_Instinct_MI300X"}


def test_unknown_gpu_needs_an_override(monkeypatch):
    from gpucluster.errors import UserError
    from gpucluster.generate import kueue
    monkeypatch.delitem(kueue.GPU_NODE_LABELS, "H200-SXM-141GB")
    with pytest.raises(UserError, match="--node-label h200:KEY=VALUE"):
        kueue.kueue_objects(_spec())
    objs = kueue.kueue_objects(_spec(), node_labels=["h200:nvidia.com/gpu.product=NVIDIA-H200-NVL"])
    assert _flavors(objs)["h200"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H200-NVL"}


@pytest.mark.parametrize("label,needle", [
    ("novalue", "KEY=VALUE"), ("bad key=x", "label key"), ("nvidia.com/gpu.product=a b", "label value"),
    ("x=" + "a" * 64, "label value"), ("nope:a=b", "no pool named"), ("k=v\nw", "control or invisible"),
    (":a=b", "empty pool"),
])
def test_bad_node_labels(tmp_path, label, needle):
    out = tmp_path / "k.yaml"
    assert_one_line_error(run("generate", "kueue", MIXED, "--node-label", label, "-o", str(out)), "--node-label",
                          needle)
    assert not out.exists()


def test_api_version_served_and_older():
    out = run("generate", "kueue", MIXED, check_rc=0).stdout
    docs = list(yaml.safe_load_all(out))
    assert {d["apiVersion"] for d in docs} == {"kueue.x-k8s.io/v1beta2"}
    old = list(yaml.safe_load_all(run("generate", "kueue", MIXED, "--api-version", "v1beta1", check_rc=0).stdout))
    assert {d["apiVersion"] for d in old} == {"kueue.x-k8s.io/v1beta1"}
    assert [d["spec"] for d in old] == [d["spec"] for d in docs]   # the fields written are the same in both
    assert_one_line_error(run("generate", "kueue", MIXED, "--api-version", "v2"), "--api-version")
