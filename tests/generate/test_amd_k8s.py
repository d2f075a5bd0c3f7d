"""An MI300X plan's Kubernetes job asks for what AMD nodes offer (issue 22): the AMD device
plugin's `amd.com/gpu`, a ROCm image, and Kueue admits it under the MI300X flavor's quota. The
Kueue objects validate against Kueue's own CRDs (../shared/schemas/kueue, README there)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests_cli_helpers import ROOT, run

MIXED = "examples/mixed-h100-h200-mi300x.yaml"
CRDS = ROOT.parent / "shared" / "schemas" / "kueue"


def _plan(tmp_path: Path, gpu: str) -> Path:
    p = tmp_path / f"{gpu.split(':')[0]}.json"
    p.write_text(run("plan", "train", "--gpu", gpu, "--nodes", "2", "--model", "llama3-8b", "--tokens", "10B",
                     "--json", check_rc=0).stdout)
    return p


def _job(tmp_path: Path, gpu: str) -> dict:
    out = run("generate", "k8s", str(_plan(tmp_path, gpu)), check_rc=0).stdout
    return next(d for d in yaml.safe_load_all(out) if d["kind"] == "Job")


def _container(job: dict) -> dict:
    return job["spec"]["template"]["spec"]["containers"][0]


def test_mi300x_job_requests_amd_gpus_in_a_rocm_image(tmp_path):
    c = _container(_job(tmp_path, "MI300X:8"))
    assert c["resources"]["limits"] == {"amd.com/gpu": "8"} and c["resources"]["requests"]["amd.com/gpu"] == "8"
    assert "nvidia.com/gpu" not in c["resources"]["requests"]
    assert "rocm" in c["image"] and "nvcr.io" not in c["image"]
    h100 = _container(_job(tmp_path, "H100:8"))
    assert h100["resources"]["limits"] == {"nvidia.com/gpu": "8"} and h100["image"].startswith("nvcr.io/nvidia/")


def test_placeholders_are_container_env_the_command_checks(tmp_path):
    c = _container(_job(tmp_path, "H100:8"))
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["DATA_PATH"] == env["TOKENIZER_MODEL"] == env["CHECKPOINT_DIR"] == ""
    assert c["command"][:2] == ["/bin/bash", "-c"] and "exit 2" in c["command"][2]
    argv = c["command"][4:]
    assert argv[0] == "torchrun" and argv[argv.index("--data-path") + 1] == "$(DATA_PATH)"


def _schema(kind_file: str, version: str) -> dict:
    crd = yaml.safe_load((CRDS / kind_file).read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)


def _validate(obj: dict, kind_file: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema(kind_file, obj["apiVersion"].split("/")[1])
    # metadata is the API server's ObjectMeta, not in the CRD schema
    jsonschema.validate({k: v for k, v in obj.items()}, schema)


@pytest.mark.skipif(not CRDS.exists(), reason=f"Kueue CRDs not at {CRDS}")
def test_kueue_admits_the_mi300x_job_under_its_flavor(tmp_path):
    """The job's GPU resource is one the ClusterQueue covers, with the MI300X flavor's quota
    holding the pool's GPUs (not 0), and every Kueue object passes Kueue's CRD schema."""
    objs = list(yaml.safe_load_all(run("generate", "kueue", MIXED, check_rc=0).stdout))
    files = {"ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml", "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
             "LocalQueue": "kueue.x-k8s.io_localqueues.yaml"}
    for o in objs:
        _validate(o, files[o["kind"]])
    cq = next(o for o in objs if o["kind"] == "ClusterQueue")
    (group,) = cq["spec"]["resourceGroups"]
    flavor = next(o for o in objs if o["kind"] == "ResourceFlavor"
                  and o["spec"]["nodeLabels"].get("amd.com/gpu.product-name") == "AMD_Instinct_MI300X_OAM")
    quota = next(f for f in group["flavors"] if f["name"] == flavor["metadata"]["name"])
    want = _container(_job(tmp_path, "MI300X:8"))["resources"]["requests"]
    gpu_key = next(k for k in want if k.endswith("/gpu"))
    assert gpu_key in group["coveredResources"]
    nominal = {r["name"]: r["nominalQuota"] for r in quota["resources"]}
    from gpucluster.specs.cluster import load_cluster
    pool = next(p for p in load_cluster(str(ROOT / MIXED)).node_pools if p.gpu == "MI300X")
    assert nominal[gpu_key] == pool.total_gpus > 0
    assert nominal.get("nvidia.com/gpu", 0) == 0
