"""DeepSpeed configs (issue 13): dp = GPUs / (tp x pp x cp) in the batch identity, context
parallelism and interleave not dropped silently, what DeepSpeed cannot run refused. With
deepspeed installed (the `frameworks` extra) every config is read by DeepSpeed's own
DeepSpeedConfig, whose batch check is the one that rejected the old output."""

import json

import pytest
from gen_helpers import ranked_docs, with_layout, write_plan
from tests_cli_helpers import assert_one_line_error, run


def _plan(tmp_path, doc, name="plan.json"):
    from gpucluster.generate.plan_file import load_plan
    return load_plan(str(write_plan(tmp_path, doc, name)))


def test_context_parallel_batch_identity(plan_doc, tmp_path):
    from gpucluster.generate.deepspeed import deepspeed_config
    doc = plan_doc("cp")
    lay = doc["best"]["layout"]
    assert lay["cp"] == 4
    plan = _plan(tmp_path, doc)
    cfg = deepspeed_config(plan)
    dp = plan.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    assert dp == lay["dp"]
    assert cfg["train_batch_size"] == lay["global_batch"] == (
        cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * dp)
    assert cfg["sequence_parallel_size"] == 4


def test_what_deepspeed_cannot_express_is_said_on_stderr(plan_doc, tmp_path):
    doc = with_layout(plan_doc("cp"), interleave=2)
    proc = run("generate", "deepspeed", str(write_plan(tmp_path, doc)), check_rc=0)
    json.loads(proc.stdout)
    warnings = proc.stderr.strip().splitlines()
    assert any("best.layout.cp" in w and "Ulysses" in w for w in warnings), warnings
    assert any("best.layout.interleave" in w and "1F1B" in w for w in warnings), warnings
    assert all(w.startswith("warning: ") for w in warnings)
    # A plain data-parallel plan: nothing to say.
    plain = with_layout(plan_doc("zero3"))
    assert run("generate", "deepspeed", str(write_plan(tmp_path, plain, "z.json")), check_rc=0).stderr == ""


def test_what_deepspeed_cannot_run_is_refused(plan_doc, tmp_path):
    doc = plan_doc("13b")   # pp=2
    p = write_plan(tmp_path, with_layout(doc, zero=2), "z2.json")
    assert_one_line_error(run("generate", "deepspeed", str(p)), str(p), "best.layout.zero", "pipeline")
    p = write_plan(tmp_path, with_layout(doc, zero=0, offload_optimizer=True), "off.json")
    assert_one_line_error(run("generate", "deepspeed", str(p)), "best.layout.offload_optimizer")


def test_overlap_and_pipeline_partition(plan_doc, tmp_path):
    from gpucluster.generate.deepspeed import deepspeed_config
    cfg = deepspeed_config(_plan(tmp_path, with_layout(plan_doc("13b"), overlap_dp_comm=False)))
    assert cfg["zero_optimization"]["overlap_comm"] is False
    assert cfg["pipeline"] == {"stages": 2, "partition": "uniform"}
    doc = with_layout(plan_doc("zero3"), zero3_prefetch_params=2.5e8)
    assert deepspeed_config(_plan(tmp_path, doc))["zero_optimization"]["stage3_prefetch_bucket_size"] == 250000000


class _Mpu:
    """What Megatron-DeepSpeed hands DeepSpeed: the data-parallel group's size."""
    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0

    def get_model_parallel_world_size(self) -> int:
        return 1

    def get_model_parallel_rank(self) -> int:
        return 0


@pytest.mark.parametrize("name", ["13b", "cp", "zero3", "grid70", "moe"])
def test_deepspeed_reads_every_config(plan_doc, tmp_path, name, monkeypatch):
    pytest.importorskip("deepspeed", reason="deepspeed not installed (pip install -e '.[frameworks]')")
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    from gpucluster.errors import UserError
    from gpucluster.generate.deepspeed import deepspeed_config
    # Rank 0 of an initialised job (DeepSpeedConfig asks for the rank first, and takes a world of
    # one when torch.distributed is not up, which would check nothing).
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    checked = 0
    for i, doc in enumerate(ranked_docs(plan_doc(name))):
        plan = _plan(tmp_path, doc, f"{i}.json")
        try:
            cfg = deepspeed_config(plan)
        except UserError:
            continue
        lay = plan.layout
        ds = DeepSpeedConfig(json.loads(json.dumps(cfg)), mpu=_Mpu(lay["dp"]))
        assert ds.world_size == lay["dp"] and ds.train_batch_size == lay["global_batch"]
        if lay["tp"] == 1 and lay["pp"] == 1:
            # No mpu (a plain or Hugging Face program): DeepSpeed takes all ranks divided by
            # sequence_parallel_size as the data-parallel size.
            monkeypatch.setattr(dist, "get_world_size", lambda group=None, n=plan.gpus: n)
            ds = DeepSpeedConfig(json.loads(json.dumps(cfg)))
            assert ds.world_size == lay["dp"]
        checked += 1
    assert checked


def test_deepspeed_rejected_the_old_arithmetic(plan_doc, tmp_path, monkeypatch):
    """The issue's failure, reproduced against DeepSpeed: dp counted as GPUs / (tp x pp) with
    context parallelism is refused by DeepSpeedConfig; the generated config is not."""
    pytest.importorskip("deepspeed", reason="deepspeed not installed (pip install -e '.[frameworks]')")
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    from gpucluster.generate.deepspeed import deepspeed_config
    doc = with_layout(plan_doc("cp"), tp=1, pp=1, interleave=1, sequence_parallel=False)
    lay = doc["best"]["layout"]
    lay["dp"] = 64 // lay["cp"]
    plan = _plan(tmp_path, doc)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: plan.gpus)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    cfg = deepspeed_config(plan)
    DeepSpeedConfig(dict(cfg))
    old = dict(cfg)
    del old["sequence_parallel_size"]
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        DeepSpeedConfig(old)


def test_embedding_and_loss_aware_split_is_said(plan_doc, tmp_path):
    """The plan's pipeline split with the embedding and the loss counted (Llama 3.1 405B: 126 + 2
    on pp=8) cannot go in a DeepSpeed config: one line says so, with the plan's layers per stage."""
    doc = plan_doc("13b")   # 40 layers, pp=2
    lay = doc["best"]["layout"]
    doc["layers"] = 126
    doc.pop("model_spec")      # a 126-layer stand-in: no shape to agree with
    doc = with_layout(doc, pp_embedding_layer=True, pp_loss_layer=True, pp=8, interleave=1, dp=lay["dp"] // 4)
    proc = run("generate", "deepspeed", str(write_plan(tmp_path, doc)), check_rc=0)
    json.loads(proc.stdout)
    [line] = [w for w in proc.stderr.splitlines() if "best.layout.pp:" in w]
    assert "cannot set the pipeline split" in line and "[15, 16, 16, 16, 16, 16, 16, 15]" in line
    assert "the embedding and the loss" in line
    # An even split of the transformer layers alone is what "uniform" does: nothing to say.
    even = run("generate", "deepspeed", str(write_plan(tmp_path, plan_doc("13b"), "even.json")), check_rc=0)
    assert "best.layout.pp:" not in even.stderr
