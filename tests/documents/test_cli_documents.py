"""Every command's --json output on the examples validates against its document model and
against the JSON Schema `gpucluster schema NAME` exports (commands that need GPUs or engines
are left out: bench collective, gemm, hbm, slurm)."""

from __future__ import annotations

import json

import pytest
from doc_helpers import json_of

from gpucluster.documents import model_of, schema_id

jsonschema = pytest.importorskip("jsonschema")

BENCH = {"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "backend": "nccl", "world_size": 16,
         "nodes": 2, "ranks_per_node": 8, "wrong_total": 0,
         "node_ranks": {f"gpu{i:02d}": list(range(i * 8, (i + 1) * 8)) for i in range(2)},
         "rows": [{"size_bytes": s, "busbw_gbps": 20.0, "algbw_gbps": 10.0, "time_us": 1.0, "wrong": 0}
                  for s in (1 << 20, 1 << 24, 1 << 28, 1 << 30)]}

CASES = [
    ("plan-train", ["plan", "train", "--gpu", "H100:8", "--nodes", "2", "--model", "llama2-7b", "--tokens", "100B"]),
    ("plan-train", ["plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
                    "--tokens", "15T"]),
    ("plan-serve", ["plan", "serve", "--model", "llama3-8b", "--rate", "10", "--gpu", "H100:8"]),
    ("plan-serve", ["plan", "serve", "--model", "llama3-70b", "--gpu", "H100:8", "--rate", "1000", "--slo-ttft",
                    "500ms", "--slo-tpot", "50ms", "--precision", "fp8", "--simulate", "--compare", "H200",
                    "--cpu", "EPYC-9654:2"]),
    ("comm", ["comm", "--gpu", "H100:8"]),
    ("comm", ["comm", "--cluster", "examples/h200-256-ndr400.yaml", "--gpus", "64"]),
    ("topology", ["topology", "--cluster", "examples/mixed-h100-h200-mi300x.yaml"]),
    ("cost", ["cost", "examples/h200-256-ndr400.yaml", "--model", "llama2-7b", "--serve-tokens-per-s", "1000"]),
    ("cost", ["cost", "examples/seed-figures/tco-512-h200.yaml"]),
    ("facility", ["facility", "examples/h200-256-ndr400.yaml", "--model", "llama2-7b"]),
    ("facility", ["facility", "examples/mixed-h100-h200-mi300x.yaml"]),
    ("reliability", ["reliability"]),
    ("reliability", ["reliability", "examples/h200-256-ndr400.yaml", "--interval", "30m"]),
    ("check", ["check", "examples/h200-256-100gbe.yaml", "--job", "examples/jobs/seed-train-70b.sbatch"]),
    ("advise", ["advise", "--model", "llama2-13b", "--deadline", "30d", "--rate", "10"]),
    ("validate", ["validate", "validation/training-llama3-meta.yaml"]),
    ("simulation", ["simulate", "examples/scenarios/shared-vs-partitioned.yaml", "--policy", "backfill"]),
    ("simulation-compare", ["simulate", "compare", "examples/scenarios/shared-vs-partitioned.yaml",
                            "--policies", "fifo,backfill"]),
    ("sweep", ["sweep", "examples/sweeps/plan-grid.yaml", "--workers", "1"]),
]


def _schema(name: str) -> dict:
    from gpucluster.cli.schema_cmd import schema_of
    return schema_of(name)


def _holds(name: str, doc: dict) -> None:
    assert doc["schema"] == schema_id(name)
    model_of(name).model_validate(doc)
    jsonschema.validate(doc, _schema(name), cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("name, args", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_command_json_matches_its_schema(name, args):
    doc = json_of(*args)
    _holds(name, doc)
    # Dumped again through the model, the document is the same text: nothing lost, nothing added.
    again = model_of(name).model_validate(doc).dump()
    assert json.dumps(again) == json.dumps(doc)


def test_diagnose_and_bench_storage(tmp_path):
    result = tmp_path / "r.json"
    result.write_text(json.dumps(BENCH))
    _holds("diagnose", json_of("diagnose", "--cluster", "examples/h100-64-ib.yaml", str(result)))
    _holds("bench-collective", BENCH)
    _holds("bench-storage", json_of("bench", "storage", str(tmp_path), "--size", "2M", "--block", "1M"))


def test_unknown_keys_are_refused_where_the_document_is_known():
    doc = json_of("comm", "--gpu", "H100:8")
    doc["surprise"] = 1
    with pytest.raises(Exception, match="surprise"):
        model_of("comm").model_validate(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _schema("comm"))


def test_the_simulation_document_keeps_keys_it_does_not_know_yet():
    """The simulator grows: a new measure must reach the JSON before this model names it."""
    doc = json_of("simulate", "examples/scenarios/shared-vs-partitioned.yaml")
    items = list(doc.items())
    items.insert(5, ("new_measure", {"x": 1}))      # in the middle, where a writer might put it
    doc = dict(items)
    doc["utilization"] = {"new_ratio": 0.5, **doc["utilization"]}
    out = model_of("simulation").model_validate(doc).dump()
    assert out["new_measure"] == {"x": 1} and out["utilization"]["new_ratio"] == 0.5
    assert json.dumps(out) == json.dumps(doc)       # in the place the writer put them
