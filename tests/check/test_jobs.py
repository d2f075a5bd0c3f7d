"""Job-file parsers: what they read, with lines, and how they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.check.jobs import Setting, parse_job, parse_text
from gpucluster.check.jobs.deepspeed import top_level_key_lines
from gpucluster.errors import UserError


def value(setting: Setting | None) -> str:
    """The value of a setting the job must have."""
    assert setting is not None
    return setting.value


ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"


def test_seed_sbatch():
    j = parse_job(str(JOBS / "seed-train-70b.sbatch"))
    assert j.kind == "sbatch" and not j.problems
    d = j.directives
    assert (d["nodes"].value, d["nodes"].line) == ("32", 4)
    assert d["gres"].value == "gpu:8" and d["exclusive"].value == "" and d["network"].value == "ib,ibd"
    assert j.env["NCCL_DEBUG"].value == "INFO" and j.env["NCCL_DEBUG"].line == 13
    [c] = j.commands
    assert c.launchers == ["srun"] and value(c.option("gradient-accumulation-steps")) == "8"
    assert value(c.option("fsdp")) == ""


def test_short_options_continuations_and_assignments():
    text = ("#!/bin/bash\n#SBATCH -N 2\n#SBATCH -n16\n#SBATCH --gpus-per-node h100:8\n"
            "NCCL_DEBUG=WARN FOO=1 srun \\\n   torchrun --nproc-per-node 8 \\\n   train.py --tp=2\n")
    j = parse_text("x.sh", text)
    assert j.directives["nodes"].value == "2" and j.directives["ntasks"].value == "16"
    assert j.directives["gpus-per-node"].value == "h100:8"
    assert j.env["NCCL_DEBUG"].line == 5 and j.env["FOO"].value == "1"
    [c] = j.commands
    assert c.line == 5 and c.launchers == ["srun", "torchrun"]
    assert value(c.option("nproc_per_node")) == "8" and value(c.option("tp")) == "2"


def test_python_m_torch_distributed_run():
    [c] = parse_text("r.txt", "python -m torch.distributed.run --nnodes 2 --nproc_per_node 8 t.py\n").commands
    assert c.launchers == ["torchrun"] and value(c.option("nnodes")) == "2"


def test_shell_problem_has_its_line():
    j = parse_text("x.sh", "#!/bin/bash\n#SBATCH --nodes=2\necho 'oops\n")
    assert [(p.line, "quotation" in p.reason) for p in j.problems] == [(3, True)]
    j = parse_text("y.sh", "#SBATCH nodes=2\n")
    assert j.problems[0].line == 1


def test_deepspeed_lines_and_errors():
    j = parse_job(str(JOBS / "seed-ds-13b.json"))
    assert j.deepspeed is not None and j.deepspeed["train_batch_size"] == 256
    assert j.deepspeed_lines["train_batch_size"] == 2 and j.deepspeed_lines["zero_optimization"] == 4
    assert "stage" not in j.deepspeed_lines                  # nested keys are not top-level
    assert top_level_key_lines('{"a": {"b": 1}, "c": "x:\\"y"}') == {"a": 1, "c": 1}
    bad = parse_job(str(JOBS / "broken-ds.json"))           # seed 2 wrote Python's True
    assert bad.deepspeed is None and bad.problems[0].line == 5
    assert parse_text("a.json", "[1, 2]").problems[0].reason.startswith("a DeepSpeed config")


def test_kubernetes_multi_document():
    text = (JOBS / "seed-infer-pod.yaml").read_text() + "---\n" + (JOBS / "bad-pytorchjob.yaml").read_text()
    j = parse_text("k.yaml", text)
    pod, pj = j.workloads
    assert (pod.kind, value(pod.gpus_per_pod), value(pod.pods)) == ("Pod", "8", "1")
    assert (pj.kind, value(pj.gpus_per_pod), value(pj.pods), value(pj.nproc_per_node)) == ("PyTorchJob", "16", "8", "16")
    assert j.env["NCCL_IB_DISABLE"].value == "1" and j.env["TENSOR_PARALLEL_SIZE"].value == "8"
    assert [c.launchers for c in j.commands] == [["torchrun"], ["torchrun"]]


def test_kubernetes_problems():
    assert parse_text("k.yaml", "kind: Pod\nspec: [\n").problems[0].line is not None
    assert "not read" in parse_text("k.yaml", "apiVersion: example.com/v1\nkind: Widget\n").problems[0].reason
    assert "no `kind:`" in parse_text("k.yaml", "a: 1\n").problems[0].reason
    job = parse_text("k.yaml", "apiVersion: batch/v1\nkind: Job\nspec:\n  parallelism: 4\n  template:\n    spec:\n"
                               "      containers:\n        - name: c\n          command: [bash, -c, 'torchrun t.py']\n"
                               "          resources: {limits: {nvidia.com/gpu: 8}}\n")
    [w] = job.workloads
    assert w.pods is not None and w.pods.value == "4" and w.pods.line == 4 and job.commands[0].launchers == ["torchrun"]


def test_env_files():
    j = parse_job(str(JOBS / "bad-nccl.env"))
    assert j.kind == "nccl-env" and j.env["NCCL_SOCKET_IFNAME"].value == "docker0"
    assert j.problems[0].line == 4
    j = parse_text("nccl.conf", "# c\nexport NCCL_DEBUG=\"WARN\"\nNCCL_IB_HCA=mlx5\n")
    assert j.kind == "nccl-env" and j.env["NCCL_DEBUG"].value == "WARN"


def test_missing_file_is_bad_input():
    with pytest.raises(UserError, match="file not found"):
        parse_job("nope.sbatch")
