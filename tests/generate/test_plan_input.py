"""A plan file is validated before a single character is written (issue 13): hostile and broken
plans give one line `FILE: field: reason`, exit 2 and no file; what is generated runs under bash
without executing anything the plan held; -o is checked and written atomically."""

import json
import os
import subprocess

import pytest
from gen_helpers import with_layout, write_plan
from tests_cli_helpers import assert_one_line_error, run

PWN = "\ntouch pwned\n"


def _fake_slurm_env(tmp_path):
    """`srun`, `scontrol` stand-ins, so the sbatch script body runs under bash here (its #SBATCH
    lines are comments to bash)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("scontrol", "echo node01"), ("srun", 'printf "%s\\n" "$@" > "$RECORD"'),
                       ("sbatch", 'printf "%s\\n" "$@" > "$RECORD.sbatch"')):
        f = bin_dir / name
        f.write_text(f"#!/bin/bash\n{body}\n")
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node01",
            "SLURM_JOB_NUM_NODES": "8", "SLURM_JOB_ID": "42", "RECORD": str(tmp_path / "argv"),
            "HOME": str(tmp_path), "DATA_PATH": "/data/x", "TOKENIZER_MODEL": "/tok", "CHECKPOINT_DIR": str(tmp_path)}


# (where in the document, hostile value, the field the error must name)
HOSTILE = [
    (("target", "gpu"), "H100" + PWN, "target.gpu"),
    (("target", "gpu"), "H100;touch pwned", "target.gpu"),
    (("target", "gpu"), "H100 $(touch pwned)", "target.gpu"),
    (("model",), "Llama" + PWN, "model"),
    (("model",), "Llama`touch pwned`", "model"),
    (("target", "nic"), "8 x NDR400" + PWN, "target.nic"),
    (("target", "scale_out_link"), "InfiniBand" + PWN, "target.scale_out_link"),
    (("best", "layout", "cp"), "1" + PWN, "best.layout.cp"),
    (("best", "layout", "ep"), "1\ntouch pwned", "best.layout.ep"),
    (("best", "layout", "tp"), "2", "best.layout.tp"),
    (("best", "layout", "tp"), 2.0, "best.layout.tp"),
    (("best", "layout", "tp"), True, "best.layout.tp"),
    (("best", "layout", "pp"), -2, "best.layout.pp"),
    (("best", "layout", "pp"), 0, "best.layout.pp"),
    (("best", "layout", "dp"), 10**12, "best.layout.dp"),
    (("target", "nodes"), 10**30, "target.nodes"),
    (("target", "gpus_per_node"), 100000, "target.gpus_per_node"),
    (("seq_len",), 0, "seq_len"),
    (("best", "layout", "zero"), 4, "best.layout.zero"),
    (("best", "layout", "precision"), "fp8; touch pwned", "best.layout.precision"),
    (("best", "layout", "recompute"), "full\n", "best.layout.recompute"),
    (("best", "layout", "flash_attention"), "no", "best.layout.flash_attention"),
    (("best", "layout", "moe_overlap"), "dualpipe;x", "best.layout.moe_overlap"),
    (("best", "layout", "new_knob"), "a b; touch pwned", "best.layout"),
    (("best", "layout", "new_knob"), {"nested": 1}, "best.layout"),
    (("best", "layout", "new_knob"), 1e300, "best.layout"),
    (("best", "layout", "moe_imbalance"), 100.0, "best.layout.moe_imbalance"),
    (("best", "layout", "moe_dispatcher"), "deepep2", "best.layout.moe_dispatcher"),
    (("best", "step_s"), "fast", "best.step_s"),
    (("target", "description"), "x" + PWN, "target.description"),
    (("advice", "text"), "anywhere" + PWN, "advice.text"),
]


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@pytest.mark.parametrize("path,value,field", HOSTILE, ids=[f"{'.'.join(p)}={v!r}"[:50] for p, v, _ in HOSTILE])
def test_hostile_plan_is_refused_and_nothing_written(plan_doc, tmp_path, path, value, field):
    """Every generator reads plans through load_plan: checked in process for each value, and
    through the real command for the sbatch script (one line, exit 2, no file)."""
    from gpucluster.errors import UserError
    from gpucluster.generate.plan_file import load_plan
    doc = plan_doc("13b")
    _set(doc, path, value)
    plan = write_plan(tmp_path, doc)
    with pytest.raises(UserError) as err:
        load_plan(str(plan))
    assert err.value.file == str(plan) and (err.value.field or "").startswith(field), err.value.message
    out = tmp_path / "job.sbatch"
    assert_one_line_error(run("generate", "slurm", str(plan), "-o", str(out)), str(plan), field)
    assert not out.exists() and not list(tmp_path.glob(".job.sbatch*"))


@pytest.mark.parametrize("path", [("target", "gpu"), ("model",), ("best", "layout", "cp"), ("best", "layout", "ep")])
def test_injected_command_never_runs(plan_doc, tmp_path, path):
    """The issue's reproduction: a value holding a newline and `touch pwned`. Generating is
    refused; had a script been written, it is run under bash (its #SBATCH lines are comments
    there) and must not have created the file."""
    doc = plan_doc("13b")
    _set(doc, path, ("H100" if path[-1] == "gpu" else "2" if path[-1] in ("cp", "ep") else "m") + PWN)
    plan = write_plan(tmp_path, doc)
    script = tmp_path / "job.sbatch"
    proc = run("generate", "slurm", str(plan), "-o", str(script))
    if script.exists():
        subprocess.run(["bash", str(script)], capture_output=True, text=True, env=_fake_slurm_env(tmp_path),
                       timeout=30, cwd=tmp_path)
    assert not (tmp_path / "pwned").exists(), "the plan's value ran as a shell command"
    assert_one_line_error(proc, str(plan), ".".join(path), "control characters")
    for kind in ("torchrun", "deepspeed", "k8s"):
        proc = run("generate", kind, str(plan))
        assert_one_line_error(proc, str(plan), ".".join(path))
        assert proc.stdout == ""


@pytest.mark.parametrize("text,needle", [
    ("", "not JSON"), ("{", "not JSON"), ("[]", "gpucluster-plan-train/v1"), ("null", "gpucluster-plan-train/v1"),
    ('{"schema": "gpucluster-plan-train/v1"}', "model"),
    ('{"schema": "gpucluster-plan-train/v1", "x": NaN}', "NaN"),
    ('{"schema": "gpucluster-plan-train/v1", "x": 1e999}', "overflows"),
    ('{"schema": "gpucluster-plan-train/v1", "x": ' + "[" * 100000 + "]" * 100000 + "}", "nested"),
    ('{"schema": "gpucluster-plan-train/v1", "x": ' + "9" * 5000 + "}", "not a plan"),
])
def test_broken_plan_files(tmp_path, text, needle):
    p = tmp_path / "p.json"
    p.write_text(text)
    assert_one_line_error(run("generate", "slurm", str(p)), str(p), needle)


def test_binary_missing_and_folder_plans(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\x00\xff\xfe binary")
    assert_one_line_error(run("generate", "deepspeed", str(p)), "UTF-8")
    assert_one_line_error(run("generate", "deepspeed", str(tmp_path / "none.json")), "not found")
    assert_one_line_error(run("generate", "deepspeed", str(tmp_path)), "directory")


def test_inconsistent_plans_are_refused(plan_doc, tmp_path):
    doc = plan_doc("13b")
    lay = doc["best"]["layout"]
    cases = [(with_layout(doc, dp=lay["dp"] * 2), "best.layout", "GPUs"),
             (with_layout(doc, global_batch=lay["global_batch"] + 1), "best.layout.global_batch", "multiple"),
             (with_layout(doc, pp=1, interleave=2, dp=lay["dp"] * 2), "best.layout.interleave", "pp > 1"),
             (with_layout(doc, ep=3), "best.layout.ep", "divide")]
    for i, (d, field, why) in enumerate(cases):
        p = write_plan(tmp_path, d, f"p{i}.json")
        assert_one_line_error(run("generate", "slurm", str(p)), field, why)


def test_plan_built_in_code_is_checked_too(plan_doc, tmp_path):
    """`slurm submit` and library users build JobPlans without the file reader: the same
    check runs, and the #SBATCH quoting refuses a newline whatever reaches it."""
    from dataclasses import replace

    from gpucluster.errors import UserError
    from gpucluster.generate.plan_file import load_plan
    from gpucluster.generate.quoting import slurm_directive
    plan = load_plan(str(write_plan(tmp_path, plan_doc("13b"))))
    for change in ({"gpu": "H100" + PWN}, {"model": "m" + PWN}, {"layout": {**plan.layout, "cp": "2" + PWN}},
                   {"layout": {**plan.layout, "ep": True}}, {"nodes": 0}):
        with pytest.raises(UserError):
            replace(plan, **change)
    with pytest.raises(UserError):
        slurm_directive("a" + PWN)


def test_generated_script_runs_nothing_it_was_given(plan_doc, tmp_path):
    """What can be generated at all is run under bash (sbatch lines are comments there) with
    every user string hostile: nothing is executed, every string arrives as one argument."""
    doc = plan_doc("13b")
    doc["model"] = "Llama (13B) v2, run: 1/2"      # the widest model name the schema allows
    plan = write_plan(tmp_path, doc)
    script = tmp_path / "job.sbatch"
    evil = "x$(touch pwned)`touch pwned`;touch pwned"
    run("generate", "slurm", str(plan), "--job-name", evil, "--partition", evil, "--account", evil,
        "--gres-type", evil, "--script", evil, "--arg", evil, "--deepspeed-config", evil, "-o", str(script),
        check_rc=0)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=_fake_slurm_env(tmp_path),
                          timeout=30, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "pwned").exists()
    argv = (tmp_path / "argv").read_text().splitlines()
    assert evil in argv and argv[-1] == evil


def test_newline_in_an_option_is_refused_before_writing(plan_doc, tmp_path):
    plan = write_plan(tmp_path, plan_doc("13b"))
    out = tmp_path / "o.sbatch"
    for opt in ("--job-name", "--partition", "--gres-type", "--script", "--arg", "--deepspeed-config"):
        proc = run("generate", "slurm", str(plan), opt, "a" + PWN, "-o", str(out))
        assert_one_line_error(proc, opt)
        assert not out.exists()


def test_out_path_checked_and_written_atomically(plan_doc, tmp_path):
    plan = write_plan(tmp_path, plan_doc("13b"))
    assert_one_line_error(run("generate", "slurm", str(plan), "-o", str(tmp_path / "no" / "x.sbatch")),
                          "--out", "does not exist")
    assert_one_line_error(run("generate", "deepspeed", str(plan), "-o", str(tmp_path)), "--out", "folder")
    # Read-only: a folder root cannot write to either (root ignores chmod), then chmod for others.
    assert_one_line_error(run("generate", "kueue", "examples/h100-64-ib.yaml", "-o", "/proc/gpucluster.yaml"),
                          "--out")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        assert_one_line_error(run("generate", "slurm", str(plan), "-o", str(ro / "x.sbatch")), "not writable")
    # A bad plan leaves an existing file as it was; a good one replaces it whole, no temporary left.
    out = tmp_path / "job.sbatch"
    out.write_text("old\n")
    bad = write_plan(tmp_path, with_layout(plan_doc("13b"), tp="2"), "bad.json")
    assert_one_line_error(run("generate", "slurm", str(bad), "-o", str(out)), "best.layout.tp")
    assert out.read_text() == "old\n"
    run("generate", "slurm", str(plan), "-o", str(out), check_rc=0)
    assert out.read_text().startswith("#!/bin/bash\n") and os.access(out, os.X_OK)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_old_plan_without_gpu_fields_still_reads(plan_doc, tmp_path):
    doc = plan_doc("13b")
    del doc["target"]["gpu"], doc["target"]["gpus_per_node"]
    out = run("generate", "slurm", str(write_plan(tmp_path, doc)), check_rc=0).stdout
    assert "#SBATCH --gres=gpu:h100:8" in out
    doc["target"]["fabric"] = "H100\n x 8 per node"
    assert_one_line_error(run("generate", "slurm", str(write_plan(tmp_path, doc))), "target.fabric")


def test_unknown_layout_keys_of_a_newer_planner_are_accepted(plan_doc, tmp_path):
    doc = with_layout(plan_doc("13b"), some_flag=True, some_count=3, some_mode="fast_v2", some_ratio=0.25)
    run("generate", "slurm", str(write_plan(tmp_path, doc)), check_rc=0)
    json.loads(run("generate", "deepspeed", str(write_plan(tmp_path, doc)), check_rc=0).stdout)


def test_model_spec_is_checked(plan_doc, tmp_path):
    """The plan's model shape is written into the job: a shape that is not a model, or that
    disagrees with the plan's layer count, is one line naming the field."""
    doc = plan_doc("13b")
    assert doc["model_spec"]["layers"] == doc["layers"] == 40
    bad = json.loads(json.dumps(doc))
    bad["model_spec"]["heads"] = 7       # 5120 is not a multiple of 7
    assert_one_line_error(run("generate", "slurm", str(write_plan(tmp_path, bad, "b.json"))), "model_spec")
    other = json.loads(json.dumps(doc))
    other["model_spec"]["layers"] = 41
    assert_one_line_error(run("generate", "slurm", str(write_plan(tmp_path, other, "o.json"))),
                          "model_spec.layers", "40")
