"""Megatron-LM arguments that run the plan (issue 13): ZeRO-3 is not turned into ZeRO-1, uneven
pipeline stages are written the way Megatron-Core accepts them, the stack options are carried.
With megatron-core installed (the `frameworks` extra), every generated argument set is also run
through megatron-core's own TransformerConfig / DistributedDataParallelConfig / OptimizerConfig
validation and its micro-batch calculator."""

import inspect
from pathlib import Path

import pytest
from gen_helpers import ranked_docs, with_layout, write_plan
from tests_cli_helpers import assert_one_line_error, run


def _plan(tmp_path, doc, name="plan.json"):
    from gpucluster.generate.plan_file import load_plan
    return load_plan(str(write_plan(tmp_path, doc, name)))


def _args(tmp_path, doc):
    from gpucluster.generate.megatron import megatron_args
    return megatron_args(_plan(tmp_path, doc)).args


def test_zero3_is_megatron_fsdp_not_the_distributed_optimizer_alone(plan_doc, tmp_path):
    doc = plan_doc("zero3")
    assert doc["best"]["layout"]["zero"] == 3 and doc["best"]["layout"]["pp"] == 1
    args = _args(tmp_path, doc)
    assert "--use-megatron-fsdp" in args and "--data-parallel-sharding-strategy=optim_grads_params" in args
    zero2 = _args(tmp_path, with_layout(doc, zero=2))
    assert "--data-parallel-sharding-strategy=optim_grads" in zero2
    zero1 = _args(tmp_path, with_layout(doc, zero=1))
    assert "--use-distributed-optimizer" in zero1 and "--use-megatron-fsdp" not in zero1


def test_zero3_with_pipeline_is_refused(plan_doc, tmp_path):
    doc = plan_doc("13b")    # pp=2
    p = write_plan(tmp_path, with_layout(doc, zero=3))
    assert_one_line_error(run("generate", "slurm", str(p)), str(p), "best.layout.zero", "pp=2")


def test_uneven_stages_are_written_as_megatron_accepts(plan_doc, tmp_path):
    """80 layers on pp=32: not --pipeline-model-parallel-size=32 alone (Megatron refuses it)."""
    from gpucluster.generate.megatron import plan_stage_layers
    doc = plan_doc("uneven")
    assert doc["best"]["layout"]["pp"] == 32 and doc["best"]["layout"]["interleave"] == 1
    args = _args(tmp_path, doc)
    layout = [a for a in args if a.startswith("--pipeline-model-parallel-layout=")]
    assert layout == ["--pipeline-model-parallel-layout=Ett|(ttt|)*16(tt|)*14ttL"]
    assert sum(plan_stage_layers(80, 32)) == 80
    # The middle stages even: the older --decoder-first/last flags say it.
    args = _args(tmp_path, with_layout(doc, pp=4, dp=doc["best"]["layout"]["dp"] * 8))
    assert args.count("--pipeline-model-parallel-size=4") == 1
    assert not any(a.startswith("--decoder-") or a.startswith("--pipeline-model-parallel-layout") for a in args)


def test_first_last_flags_when_the_middle_is_even(plan_doc, tmp_path):
    from gpucluster.generate.megatron import megatron_args
    plan = _plan(tmp_path, plan_doc("13b"))
    from dataclasses import replace
    plan = replace(plan, layers=30, model_spec=None, layout={**plan.layout, "pp": 4, "dp": plan.layout["dp"] // 2, "interleave": 1})
    args = megatron_args(plan).args
    assert "--decoder-first-pipeline-num-layers=7" in args and "--decoder-last-pipeline-num-layers=7" in args


def test_embedding_and_loss_layers(plan_doc, tmp_path):
    """Llama 3.1 405B: 126 layers + embedding + loss = 128 on pp=8 x interleave 8."""
    doc = plan_doc("13b")
    lay = doc["best"]["layout"]
    doc = with_layout(doc, pp_embedding_layer=True, pp_loss_layer=True)
    doc["layers"] = 126
    doc.pop("model_spec")      # a 126-layer stand-in: no shape to agree with
    doc = with_layout(doc, pp=8, interleave=8, dp=lay["dp"] // 4, tp=lay["tp"])
    args = _args(tmp_path, doc)
    assert "--account-for-embedding-in-pipeline-split" in args and "--account-for-loss-in-pipeline-split" in args
    # 40 layers + 2 on pp=4 do not divide: the plan's own split as a layout, never with the flags.
    doc = with_layout(plan_doc("13b"), pp_embedding_layer=True, pp_loss_layer=True, pp=4, interleave=1,
                      dp=lay["dp"] // 2)
    args = _args(tmp_path, doc)
    assert not any(a.startswith("--account-for") for a in args)
    # 42 on 4 stages: 10, 11, 11, 10; the embedding and the loss take a layer's place at the ends.
    assert f"--pipeline-model-parallel-layout=E{'t' * 9}|({'t' * 11}|)*2{'t' * 9}L" in args


def test_interleave_needs_even_virtual_stages(plan_doc, tmp_path):
    doc = plan_doc("13b")   # 40 layers, pp=2
    p = write_plan(tmp_path, with_layout(doc, interleave=3))
    assert_one_line_error(run("generate", "torchrun", str(p)), "best.layout.interleave", "pp x interleave")


def test_stack_options(plan_doc, tmp_path):
    doc = plan_doc("13b")
    args = _args(tmp_path, with_layout(doc, flash_attention=False, overlap_dp_comm=False, recompute="full"))
    assert "--attention-backend=unfused" in args and "--overlap-grad-reduce" not in args
    assert {"--recompute-granularity=full", "--recompute-method=uniform", "--recompute-num-layers=1"} <= set(args)
    args = _args(tmp_path, with_layout(doc, overlap_tp_comm=True, sequence_parallel=True))
    assert "--tp-comm-overlap" in args and "--overlap-grad-reduce" in args and "--overlap-param-gather" in args
    assert "--attention-backend=unfused" not in args
    p = write_plan(tmp_path, with_layout(doc, overlap_tp_comm=True, sequence_parallel=False))
    assert_one_line_error(run("generate", "slurm", str(p)), "best.layout.overlap_tp_comm", "sequence parallel")
    p = write_plan(tmp_path, with_layout(doc, moe_overlap="dualpipe"))
    assert_one_line_error(run("generate", "slurm", str(p)), "best.layout.moe_overlap", "ep > 1")
    lay = doc["best"]["layout"]
    p = write_plan(tmp_path, with_layout(doc, moe_overlap="dualpipe", framework="deepseek", interleave=1,
                                         pp=2 * lay["pp"], dp=lay["dp"] // 2))
    assert_one_line_error(run("generate", "slurm", str(p)), "best.layout.framework", "DualPipe")
    args = _args(tmp_path, with_layout(doc, offload_optimizer=True))
    assert "--optimizer-cpu-offload" in args and "--optimizer-offload-fraction=1.0" in args


def test_a_plan_of_another_stack_says_its_step_time_is_not_this_jobs(plan_doc, tmp_path):
    from gpucluster.generate.megatron import megatron_args

    doc = plan_doc("zero3")
    assert not any("best.layout.framework" in w for w in megatron_args(_plan(tmp_path, doc)).warnings)
    for fw in ("fsdp", "torchtitan"):
        res = megatron_args(_plan(tmp_path, with_layout(doc, framework=fw)))
        assert any("best.layout.framework" in w and f"{fw}'s" in w for w in res.warnings), fw


def test_dualpipe_plans_rank_only_what_megatron_runs(tmp_path):
    """`plan train --moe-overlap dualpipe` ranked DeepSeek-V3 layouts with pp=32 and no virtual
    stages, which Megatron-Core's expert all-to-all overlap refuses (issue 22): now every ranked
    layout is one `generate` writes."""
    import importlib.util

    # By path: another folder's conftest may hold the name `conftest` in sys.modules.
    spec = importlib.util.spec_from_file_location("generate_conftest", Path(__file__).with_name("conftest.py"))
    assert spec is not None and spec.loader is not None
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    _plan_json = helpers._plan_json

    from gpucluster.generate.megatron import megatron_args
    doc = _plan_json("--gpu", "H100:8", "--nodes", "64", "--model", "DeepSeek-V3", "--tokens", "100B",
                     "--moe-overlap", "dualpipe", "--top", "10")
    assert any("moe_overlap dualpipe" in why for why in doc["search"]["rejected"])
    for i, d in enumerate(ranked_docs(doc)):
        lay = d["best"]["layout"]
        assert lay["moe_overlap"] == "dualpipe" and lay["ep"] > 1 and lay["recompute"] != "full"
        assert lay["pp"] == 1 or lay["interleave"] > 1
        assert "--overlap-moe-expert-parallel-comm" in megatron_args(_plan(tmp_path, d, f"{i}.json")).args


def test_every_flag_is_a_known_megatron_argument(plan_doc, tmp_path):
    from gpucluster.generate.megatron import MEGATRON_FLAGS, megatron_args
    from gpucluster.generate.plan_file import load_plan
    for name in ("13b", "uneven", "zero3", "cp", "grid70", "moe", "dsv3"):
        for i, doc in enumerate(ranked_docs(plan_doc(name))):
            try:
                args = megatron_args(load_plan(str(write_plan(tmp_path, doc, f"{name}{i}.json")))).args
            except Exception as exc:  # a refusal is a one-line UserError, never anything else
                assert type(exc).__name__ == "UserError", exc
                continue
            for a in args:
                assert a.split("=", 1)[0] in MEGATRON_FLAGS, a


def test_split_matches_the_planner():
    """plan_stage_layers mirrors model/transformer_params.stage_layer_counts (what the step time
    and memory were computed for)."""
    from gpucluster.generate.megatron import plan_stage_layers
    from gpucluster.model.transformer_params import stage_layer_counts
    extra = len(inspect.signature(stage_layer_counts).parameters) >= 4
    for layers in (1, 7, 30, 40, 61, 80, 126):
        for pp in range(1, min(layers, 40) + 1):
            assert plan_stage_layers(layers, pp) == stage_layer_counts(layers, pp), (layers, pp)
            if extra and pp > 1 and layers + 2 >= 2 * pp:
                assert plan_stage_layers(layers, pp, True, True) == stage_layer_counts(layers, pp, True, True)


# --- megatron-core's own validation -------------------------------------------------------------

def _megatron_configs(plan, args):
    """Build megatron-core's configs from the arguments as Megatron-LM does (same-named fields),
    with the model's shape from its preset."""
    torch = pytest.importorskip("torch")
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.enums import AttnBackend

    from gpucluster.generate.megatron import MEGATRON_FLAGS
    from gpucluster.specs.workload import model_presets
    spec = model_presets().get(plan.model).model
    values = {}
    for a in args:
        flag, eq, value = a.partition("=")
        field = MEGATRON_FLAGS[flag]
        if field is not None:
            values[field] = (True if not eq else int(value) if value.isdigit() else
                             float(value) if value.replace(".", "", 1).isdigit() else value)
    if "attention_backend" in values:
        values["attention_backend"] = AttnBackend[values["attention_backend"]]
    fields = {c: {f.name for f in __import__("dataclasses").fields(c)}
              for c in (TransformerConfig, DistributedDataParallelConfig, OptimizerConfig)}
    for name in values:   # every field we set exists in the installed megatron-core
        assert any(name in f for f in fields.values()), name
    dtype = torch.bfloat16 if values.get("bf16") else torch.float16 if values.get("fp16") else torch.float32
    model = {"num_layers": spec.layers, "hidden_size": spec.hidden, "num_attention_heads": spec.heads,
             "num_query_groups": spec.kv_heads, "ffn_hidden_size": spec.ffn_hidden,
             "add_bias_linear": bool(spec.bias), "gated_linear_unit": bool(spec.gated_mlp),
             "params_dtype": dtype, "pipeline_dtype": dtype}
    if spec.experts > 1:
        model.update(num_moe_experts=spec.experts, moe_router_topk=spec.experts_per_token)
    tc = TransformerConfig(**model, **{k: v for k, v in values.items() if k in fields[TransformerConfig]})
    DistributedDataParallelConfig(**{k: v for k, v in values.items() if k in fields[DistributedDataParallelConfig]})
    # The precision-aware optimizer checks Transformer Engine's version (absent here): Megatron-LM's
    # own validator covers that flag (test_megatron_validate.py).
    OptimizerConfig(**{k: v for k, v in values.items()
                       if k in fields[OptimizerConfig] and k != "use_precision_aware_optimizer"})
    return tc


def _check_megatron(plan, args):
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    tc = _megatron_configs(plan, args)
    lay = plan.layout
    # Megatron-LM's own rule (arguments.py validate_args): an even split unless one of the
    # uneven-split arguments is given.
    if not any(a.startswith(("--decoder-first", "--decoder-last", "--pipeline-model-parallel-layout",
                             "--account-for")) for a in args):
        assert tc.num_layers % (lay["pp"] * lay["interleave"]) == 0, args
    # Megatron-LM's batch identity: global = micro x accumulation x dp.
    calc = ConstantNumMicroBatchesCalculator(lay["global_batch"], lay["micro_batch"], lay["dp"], None, 0)
    assert calc.get() * lay["micro_batch"] * lay["dp"] == lay["global_batch"]


@pytest.mark.parametrize("name", ["13b", "uneven", "zero3", "cp", "grid70", "moe", "dsv3", "dualpipe"])
def test_megatron_core_accepts_every_ranked_layout(plan_doc, tmp_path, name):
    pytest.importorskip("megatron.core", reason="megatron-core not installed (pip install -e '.[frameworks]')")
    from gpucluster.errors import UserError
    from gpucluster.generate.megatron import megatron_args
    from gpucluster.generate.plan_file import load_plan
    checked = 0
    for i, doc in enumerate(ranked_docs(plan_doc(name))):
        plan = load_plan(str(write_plan(tmp_path, doc, f"{i}.json")))
        try:
            args = megatron_args(plan).args
        except UserError:
            continue
        _check_megatron(plan, args)
        checked += 1
    assert checked


def test_megatron_core_accepts_the_uneven_and_stack_cases(plan_doc, tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core not installed (pip install -e '.[frameworks]')")
    from gpucluster.generate.megatron import megatron_args
    doc = plan_doc("uneven")
    dp = doc["best"]["layout"]["dp"]
    cases = [doc, with_layout(doc, pp=16, dp=dp * 2), with_layout(doc, pp=64, dp=1, tp=4),
             with_layout(doc, pp_embedding_layer=True, pp_loss_layer=True, pp=2, dp=dp * 16),
             with_layout(doc, pp_embedding_layer=True, pp_loss_layer=True),
             with_layout(doc, pp_embedding_layer=True, pp=8, dp=dp * 4),
             with_layout(doc, flash_attention=False, recompute="full", offload_optimizer=True, precision="fp8")]
    for i, d in enumerate(cases):
        plan = _plan(tmp_path, d, f"{i}.json")
        _check_megatron(plan, megatron_args(plan).args)
    # What megatron-core itself refuses: the issue's --pipeline-model-parallel-size=32 alone.
    plan = _plan(tmp_path, doc, "x.json")
    with pytest.raises((ValueError, AssertionError)):
        _megatron_configs(plan, ["--pipeline-model-parallel-size=32", "--bf16",
                                 "--pipeline-model-parallel-layout=Ett|(ttt|)*17(tt|)*13ttL"])
