"""Generators: sbatch, torchrun, DeepSpeed, Kubernetes and Kueue from a real plan; safe quoting;
`gpucluster check` passes on everything generated."""

import json
import os
import shlex
import shutil
import subprocess

import pytest
import yaml

from tests_cli_helpers import ROOT, assert_one_line_error, run

EVIL = 'x"; rm -rf ~; echo "'
CLUSTER = "examples/h100-64-ib.yaml"


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("plan") / "plan.json"
    proc = run("plan", "train", "--cluster", CLUSTER, "--model", "llama2-13b", "--tokens", "100B",
               "--layout", "tp=2,pp=2", "--json", check_rc=0)
    p.write_text(proc.stdout)
    return p


@pytest.fixture(scope="module")
def plan(plan_file):
    from gpucluster.generate.plan_file import load_plan
    return load_plan(str(plan_file))


def test_plan_file_fields(plan):
    assert plan.gpu == "H100-SXM5-80GB" and plan.gpus_per_node == 8 and plan.nodes == 8
    assert plan.scale_out_link == "InfiniBand"
    lay = plan.layout
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay.get("cp", 1) == plan.gpus


def test_plan_file_bad_input(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "other"}')
    assert_one_line_error(run("generate", "slurm", str(bad)), "gpucluster-plan-train/v1")
    bad.write_text("{not json")
    assert_one_line_error(run("generate", "deepspeed", str(bad)), "not JSON")


def test_sbatch_layout_and_nccl(plan):
    from gpucluster.generate.slurm import SlurmOptions, sbatch_script
    from gpucluster.generate.torchrun import Launch
    text = sbatch_script(plan, Launch(), SlurmOptions(job_name="llama"))
    for needle in ("#SBATCH --nodes=8", "#SBATCH --ntasks-per-node=1", "#SBATCH --gres=gpu:h100:8",
                   "#SBATCH --exclusive", "#SBATCH --time=48:00:00", "export NCCL_IB_DISABLE=0",
                   "--nproc-per-node=8", "--rdzv-backend=c10d", "--tensor-model-parallel-size=2",
                   "--pipeline-model-parallel-size=2", f"--global-batch-size={plan.layout['global_batch']}"):
        assert needle in text, needle
    assert "NCCL_DEBUG=WARN" in text


def test_ethernet_plan_disables_ib(tmp_path):
    proc = run("plan", "train", "--gpu", "H100:8", "--nodes", "2", "--nic", "Ethernet-100G", "--nics-per-node", "1",
               "--model", "llama2-7b", "--tokens", "10B", "--json", check_rc=0)
    p = tmp_path / "eth.json"
    p.write_text(proc.stdout)
    out = run("generate", "slurm", str(p), check_rc=0).stdout
    assert "export NCCL_IB_DISABLE=1" in out and "NCCL_SOCKET_NTHREADS" in out


def _fake_srun_env(tmp_path):
    """`srun`, `scontrol` and `torchrun` stand-ins that record their argv, so the script runs here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("scontrol", 'echo node01; echo node02'),
                       ("srun", 'printf "%s\\n" "$@" > "$RECORD"'),
                       ("torchrun", 'exit 0'), ("sbatch", 'printf "%s\\n" "$@" > "$RECORD.sbatch"')):
        f = bin_dir / name
        f.write_text(f"#!/bin/bash\n{body}\n")
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node[01-02]",
            "SLURM_JOB_NUM_NODES": "8", "SLURM_JOB_ID": "42", "RECORD": str(tmp_path / "argv"), "HOME": str(tmp_path),
            "DATA_PATH": "/data/x", "TOKENIZER_MODEL": "/tok", "CHECKPOINT_DIR": str(tmp_path / "ckpt")}


def test_evil_job_name_runs_and_is_literal(plan_file, tmp_path):
    """The script runs (bash), names the job literally (as sbatch parses directives) and the
    arguments arrive intact; nothing in the name is executed."""
    script = tmp_path / "job.sbatch"
    run("generate", "slurm", str(plan_file), "--job-name", EVIL, "--arg", "--data=a b; $(touch pwned)",
        "--script", "my train.py", "-o", str(script), check_rc=0)
    env = _fake_srun_env(tmp_path)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[0] == "--kill-on-bad-exit=1" and argv[1] == "torchrun"
    assert "--rdzv-endpoint=node01:29500" in argv and "--nnodes=8" in argv and "--rdzv-id=42" in argv
    assert "my train.py" in argv and argv[-1] == "--data=a b; $(touch pwned)"
    assert not (tmp_path / "pwned").exists()
    assert sbatch_directives(script.read_text())["job-name"] == EVIL


def test_placeholders_stop_the_job_until_filled(plan_file, tmp_path):
    """Data, tokenizer and checkpoint directory: the script exits 2 naming the first one unset,
    before it launches or chains anything; filled in, the job runs with them."""
    script = tmp_path / "job.sbatch"
    run("generate", "slurm", str(plan_file), "-o", str(script), check_rc=0)
    env = _fake_srun_env(tmp_path)
    for name in ("DATA_PATH", "TOKENIZER_MODEL", "CHECKPOINT_DIR"):
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=30,
                              env={k: v for k, v in env.items() if k != name})
        assert proc.returncode == 2 and f"set {name}" in proc.stderr, proc.stderr
        assert not (tmp_path / "argv").exists() and not (tmp_path / "argv.sbatch").exists()
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[argv.index("--data-path") + 1] == "/data/x" and argv[argv.index("--load") + 1] == env["CHECKPOINT_DIR"]
    # A lone torchrun command refuses too, through the shell's ${NAME:?message}.
    cmd = run("generate", "torchrun", str(plan_file), "--head", "node0", check_rc=0).stdout
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                          env={k: v for k, v in env.items() if k != "DATA_PATH"})
    assert proc.returncode != 0 and "set DATA_PATH" in proc.stderr


def test_model_shape_flags(plan_file, tmp_path):
    """Llama-2-13B's shape from its preset; a YAML model's from the plan's model_spec."""
    out = run("generate", "slurm", str(plan_file), check_rc=0).stdout
    for flag in ("--num-layers=40", "--hidden-size=5120", "--num-attention-heads=40", "--ffn-hidden-size=13824",
                 "--position-embedding-type=rope", "--swiglu", "--normalization=RMSNorm", "--disable-bias-linear"):
        assert flag in out.split(), flag
    assert "--group-query-attention" not in out      # 13B: one KV head per query head
    model = tmp_path / "m.yaml"
    model.write_text("name: tiny-gqa-moe\nlayers: 6\nhidden: 1024\nheads: 16\nkv_heads: 4\nffn_hidden: 2048\n"
                     "gated_mlp: true\nvocab: 32000\nseq_len: 2048\nexperts: 8\nexperts_per_token: 2\n"
                     "moe_ffn_hidden: 512\ndense_layers: 1\nshared_experts: 1\n")
    plan = run("plan", "train", "--gpu", "H100:8", "--model", str(model), "--tokens", "1B", "--json", check_rc=0)
    (tmp_path / "p.json").write_text(plan.stdout)
    words = shlex.split(run("generate", "torchrun", str(tmp_path / "p.json"), check_rc=0).stdout)
    for flag in ("--num-layers=6", "--hidden-size=1024", "--group-query-attention", "--num-query-groups=4",
                 "--num-experts=8", "--moe-router-topk=2", "--moe-ffn-hidden-size=512",
                 "--moe-shared-expert-intermediate-size=512", "--moe-layer-freq=([0]*1+[1]*5)", "--swiglu"):
        assert flag in words, flag


def sbatch_directives(text: str) -> dict[str, str]:
    """#SBATCH options as Slurm 22.05's sbatch reads them (src/sbatch/opt.c `_get_argument`,
    line by line): the argument ends at a blank outside quotes (checked before a backslash is
    seen), a backslash escapes the next character, quotes group and are dropped, an unescaped #
    outside quotes ends the line."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("#SBATCH"):
            continue
        rest, arg, i, quote, escape = line[len("#SBATCH"):].lstrip(), [], 0, None, False
        while i < len(rest) and (quote or not rest[i].isspace()):
            ch = rest[i]
            if escape:
                escape = False
            elif ch == "\\":
                escape, i = True, i + 1
                continue
            elif quote:
                if ch == quote:
                    quote, i = None, i + 1
                    continue
            elif ch in "\"'":
                quote, i = ch, i + 1
                continue
            elif ch == "#":
                break
            arg.append(ch)
            i += 1
        key, _, value = "".join(arg).lstrip("-").partition("=")
        out[key] = value
    return out


def test_control_characters_refused(plan_file):
    assert_one_line_error(run("generate", "slurm", str(plan_file), "--job-name", "a\nb"), "--job-name")


def test_torchrun_command(plan_file):
    out = run("generate", "torchrun", str(plan_file), "--head", "node0", check_rc=0).stdout
    # tp > 1: Megatron-LM's validate_args wants one CUDA connection (test_megatron_validate.py)
    assert out.startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes=8 --nproc-per-node=8 ")
    assert "--rdzv-endpoint=node0:29500" in out
    assert_one_line_error(run("generate", "torchrun", str(plan_file), "--head", "$(reboot)"), "--head")


def test_deepspeed_batch_identity(plan):
    from gpucluster.generate.deepspeed import deepspeed_config
    cfg = deepspeed_config(plan)
    lay = plan.layout
    assert cfg["train_batch_size"] == lay["global_batch"]
    assert cfg["train_batch_size"] == (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
                                       * lay["dp"])
    assert cfg["zero_optimization"]["stage"] == lay["zero"]
    assert cfg["bf16"]["enabled"] is (lay["precision"] in ("bf16", "fp8"))


def test_k8s_job(plan):
    from gpucluster.generate.k8s import K8sOptions, k8s_objects
    from gpucluster.generate.torchrun import Launch
    svc, job = k8s_objects(plan, Launch(), K8sOptions(job_name=EVIL, queue="team-a"))
    assert job["kind"] == "Job" and svc["spec"]["clusterIP"] == "None"
    assert job["metadata"]["name"] == "x-rm-rf-echo"
    assert job["metadata"]["annotations"]["gpucluster.io/name"] == EVIL
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" and job["spec"]["suspend"] is True
    spec = job["spec"]
    assert spec["completions"] == spec["parallelism"] == plan.nodes and spec["completionMode"] == "Indexed"
    c = spec["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "--nproc-per-node=8" in c["command"]


def test_k8s_yaml_round_trips(plan_file):
    out = run("generate", "k8s", str(plan_file), "--job-name", EVIL, check_rc=0).stdout
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    assert docs[1]["metadata"]["annotations"]["gpucluster.io/name"] == EVIL
    assert "&id" not in out


def test_kueue_objects():
    from gpucluster.generate.kueue import kueue_objects
    from gpucluster.specs.cluster import load_cluster
    spec = load_cluster(str(ROOT / "examples/mixed-h100-h200-mi300x.yaml"))
    objs = kueue_objects(spec, queue="research", namespace="ml")
    kinds = [o["kind"] for o in objs]
    assert kinds.count("ResourceFlavor") == len(spec.node_pools)
    cq = objs[kinds.index("ClusterQueue")]
    (group,) = cq["spec"]["resourceGroups"]
    for flavor in group["flavors"]:
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    total = sum(r["nominalQuota"] for f in group["flavors"] for r in f["resources"] if r["name"].endswith("/gpu"))
    assert total == spec.total_gpus
    lq = objs[-1]
    assert lq["kind"] == "LocalQueue" and lq["metadata"]["namespace"] == "ml"
    assert lq["spec"]["clusterQueue"] == cq["metadata"]["name"]


def test_check_passes_on_everything_generated(plan_file, tmp_path):
    if "check" not in run("--help").stdout:
        pytest.skip("gpucluster check does not exist yet")
    files = {"job.sbatch": ("slurm", str(plan_file)), "ds.json": ("deepspeed", str(plan_file)),
             "job.yaml": ("k8s", str(plan_file)), "kueue.yaml": ("kueue", CLUSTER)}
    args = []
    for name, (kind, src) in files.items():
        # The job's checkpoint interval from the cluster's storage, as `check` computes the optimum.
        extra = ("--cluster", CLUSTER) if kind in ("slurm", "k8s") else ()
        run("generate", kind, src, *extra, "-o", str(tmp_path / name), check_rc=0)
        args += ["--job", str(tmp_path / name)]
    proc = run("check", CLUSTER, *args, "--model", "llama2-13b", "--json")
    report = json.loads(proc.stdout)
    # Findings about the cluster file itself (rack power...) are not about what was generated.
    bad = [f for f in report["findings"] if f["severity"] != "info" and not str(f.get("where", "")).startswith(CLUSTER)]
    assert proc.returncode == 0 and not bad, bad


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_generated_script_is_valid_bash(plan_file, tmp_path):
    script = tmp_path / "s.sbatch"
    run("generate", "slurm", str(plan_file), "--job-name", EVIL, "--partition", "gpu #1", "-o", str(script), check_rc=0)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert os.access(script, os.X_OK)
