"""benchmarks/serving_case_engines.yaml, the hand transcription of each public serving case's engine
(read by benchmarks/inference_accuracy.py --engines only): every entry names a registry engine and
a version the registry parses, matches at least one shipped case, and a case that states its own
engine keeps it."""

import sys
from pathlib import Path

import pytest

from gpucluster.catalog.serving import engine_names, get_engine
from gpucluster.specs.loader import load_yaml

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "validation"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import inference_accuracy
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return inference_accuracy


def test_entries_name_registry_engines_and_versions(bench):
    table, _ = load_yaml(bench.ENGINES_FILE)
    assert table["cases"]
    for e in table["cases"]:
        assert e["engine"] in engine_names() and e["from"]
        name = f"{e['engine']}@{e['engine_version']}" if e.get("engine_version") else e["engine"]
        assert get_engine(name).name == e["engine"]


@pytest.mark.skipif(not (SHARED / "inference-serving-public.yaml").exists(), reason="no shared validation files")
def test_every_entry_matches_a_case_and_a_stated_engine_is_kept(bench):
    from gpucluster.validate.runner import load_file

    cases = [c for f in bench.DEFAULT for c in load_file(f).cases if c.kind == "inference"]
    table, _ = load_yaml(bench.ENGINES_FILE)
    for e in table["cases"]:
        assert any(c.id.startswith(e["prefix"]) for c in cases), e["prefix"]
    named = bench.with_engines(cases)
    assert all((c.serving or {}).get("engine") for c in named)
    lm = next(c for c in cases if c.id.startswith("lmdeploy-"))
    stated = lm.model_copy(update={"serving": {**lm.serving, "engine": "vllm"}})  # type: ignore[attr-defined]
    assert bench.with_engines([stated])[0].serving["engine"] == "vllm"
