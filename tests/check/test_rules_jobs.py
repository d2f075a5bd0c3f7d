"""Job-file rules: each with a job that triggers it and one that does not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from check_helpers import BASE, SMALL_MODEL, findings, ids, spec_with

from gpucluster.check.engine import build_context
from gpucluster.plan.reliability_plan import reliability_plan
from gpucluster.specs.cluster import ClusterSpec
from gpucluster.specs.workload import load_model_spec

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"


def job(name: str) -> dict[str, str]:
    return {name: (JOBS / name).read_text()}


SBATCH = """#!/bin/bash
#SBATCH --nodes=4
#SBATCH --ntasks-per-node={tasks}
#SBATCH --gres={gres}
{exclusive}
srun {launch} train.py
"""


def sbatch(tasks="8", gres="gpu:8", exclusive="#SBATCH --exclusive", launch="python"):
    return {"job.sbatch": SBATCH.format(tasks=tasks, gres=gres, exclusive=exclusive, launch=launch)}


# --- NCCL ----------------------------------------------------------------------------------------

def test_ib_disabled_on_infiniband(tmp_path):
    [f] = findings(tmp_path, "nccl-ib-disabled", jobs={"n.env": "NCCL_IB_DISABLE=1\n"})
    assert f.severity == "error" and f.where.endswith("n.env:1")
    assert f.evidence["busbw_gbps_tcp"] < f.evidence["busbw_gbps_rdma"]


def test_ib_disabled_clean(tmp_path):
    assert findings(tmp_path, "nccl-ib-disabled", jobs={"n.env": "NCCL_IB_DISABLE=0\n"}) == []
    eth = spec_with(**{"node_pools.0.nic": "Ethernet-400G", "fabric.switch": "SN5600-400G"})
    assert findings(tmp_path, "nccl-ib-disabled", eth, jobs={"n.env": "NCCL_IB_DISABLE=1\n"}) == []


@pytest.mark.parametrize("value, needle", [("ib9", "ib0..ib7"), ("docker0", "bridge"), ("lo", "loopback")])
def test_socket_ifname_missing(tmp_path, value, needle):
    [f] = findings(tmp_path, "nccl-socket-ifname", jobs={"n.env": f"NCCL_SOCKET_IFNAME={value}\n"})
    assert f.severity == "error" and needle in f.title


def test_socket_ifname_ib_on_ethernet(tmp_path):
    eth = spec_with(**{"node_pools.0.nic": "Ethernet-400G", "fabric.switch": "SN5600-400G"})
    [f] = findings(tmp_path, "nccl-socket-ifname", eth, jobs=job("seed-train-70b.sbatch"))
    assert "no InfiniBand" in f.title and f.where.endswith("seed-train-70b.sbatch:12")


def test_socket_ifname_with_given_interfaces(tmp_path):
    env = {"n.env": "NCCL_SOCKET_IFNAME=eth2\n"}
    [f] = findings(tmp_path, "nccl-socket-ifname", jobs=env, interfaces=["ib0", "eth0", "eth1"])
    assert "eth2" in f.title
    assert findings(tmp_path, "nccl-socket-ifname", jobs={"n.env": "NCCL_SOCKET_IFNAME=eth\n"},
                    interfaces=["ib0", "eth0"]) == []
    assert findings(tmp_path, "nccl-socket-ifname", jobs={"n.env": "NCCL_SOCKET_IFNAME==eth\n"},
                    interfaces=["ib0", "eth0"]) != []


@pytest.mark.parametrize("value", ["ib0", "ib7", "^docker0,lo", "eth0"])
def test_socket_ifname_clean(tmp_path, value):
    assert findings(tmp_path, "nccl-socket-ifname", jobs={"n.env": f"NCCL_SOCKET_IFNAME={value}\n"}) == []


def test_nccl_debug(tmp_path):
    [f] = findings(tmp_path, "nccl-debug", jobs=job("seed-train-70b.sbatch"))
    assert f.severity == "warning" and f.evidence["value"] == "INFO" and f.where.endswith(":13")
    assert findings(tmp_path, "nccl-debug", jobs=job("good-train-70b.sbatch")) == []


# --- sbatch ------------------------------------------------------------------------------------

def test_sbatch_clean(tmp_path):
    assert findings(tmp_path, "sbatch-gres", jobs=sbatch()) == []
    assert findings(tmp_path, "sbatch-gres", jobs=sbatch(tasks="1", launch="torchrun --nproc_per_node=8")) == []
    assert findings(tmp_path, "sbatch-exclusive", jobs=sbatch()) == []


def test_gres_more_than_the_node(tmp_path):
    fs = findings(tmp_path, "sbatch-gres", jobs=sbatch(gres="gpu:h200:16", tasks="8"))
    assert ("sbatch-gres", "error") in ids(fs)
    assert any("never starts" in f.title and f.where.endswith("job.sbatch:4") for f in fs)


def test_gres_fewer_with_exclusive(tmp_path):
    fs = findings(tmp_path, "sbatch-gres", jobs=sbatch(gres="gpu:4", tasks="4"))
    assert ids(fs) == [("sbatch-gres", "warning")] and "4 GPUs per node idle" in fs[0].title


def test_tasks_do_not_match(tmp_path):
    [f] = findings(tmp_path, "sbatch-gres", jobs=sbatch(tasks="8", launch="torchrun --nproc_per_node=8"))
    assert "--ntasks-per-node=1" in f.fix
    [f] = findings(tmp_path, "sbatch-gres", jobs=sbatch(tasks="2"))
    assert "6 GPUs per node sit idle" in f.title


def test_nproc_per_node_mismatch(tmp_path):
    [f] = findings(tmp_path, "sbatch-gres", jobs=sbatch(tasks="1", launch="torchrun --nproc_per_node=4"))
    assert "--nproc_per_node=4" in f.title


def test_gres_type_and_nodes(tmp_path):
    [f] = findings(tmp_path, "sbatch-gres", jobs=sbatch(gres="gpu:h100:8"))
    assert "no pool has" in f.title
    [f] = findings(tmp_path, "sbatch-gres", jobs={"j.sbatch": SBATCH.format(
        tasks="8", gres="gpu:8", exclusive="", launch="python").replace("--nodes=4", "--nodes=64")})
    assert "pool h200 has 4 nodes" in f.title


def test_exclusive_missing(tmp_path):
    [f] = findings(tmp_path, "sbatch-exclusive", jobs=sbatch(exclusive=""))
    assert f.severity == "warning" and f.where.endswith("job.sbatch:2")


def test_seed_script_is_consistent_on_its_cluster(tmp_path):
    spec = spec_with(**{"node_pools.0.count": 32})
    assert findings(tmp_path, "sbatch-gres", spec, jobs=job("seed-train-70b.sbatch")) == []


# --- DeepSpeed ---------------------------------------------------------------------------------

def test_deepspeed_batch_mismatch(tmp_path):
    cfg = '{"train_batch_size": 1000, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}'
    [f] = findings(tmp_path, "deepspeed-batch", jobs={"ds.json": cfg})
    assert f.severity == "error" and f.evidence["dp"] == 32 and "= 1024" in f.title and f.where.endswith("ds.json:1")


def test_deepspeed_batch_underivable(tmp_path):
    cfg = '{\n  "train_batch_size": 100,\n  "gradient_accumulation_steps": 4\n}'
    [f] = findings(tmp_path, "deepspeed-batch", jobs={"ds.json": cfg})
    assert "whole number" in f.title and f.where.endswith("ds.json:2")


def test_deepspeed_batch_uses_the_job_world_and_tp(tmp_path):
    cfg = '{"train_batch_size": 1024, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}'
    run = {"run.txt": "torchrun --nnodes=4 --nproc_per_node=8 train.py --tensor-model-parallel-size 8\n"}
    [f] = findings(tmp_path, "deepspeed-batch", jobs={"ds.json": cfg, **run})
    assert f.evidence["dp"] == 4 and f.evidence["tp"] == 8


def test_deepspeed_batch_clean(tmp_path):
    # seed 2's config (256 = micro x 4 x 32 -> micro 8 on 32 GPUs), a full triple and "auto"
    assert findings(tmp_path, "deepspeed-batch", jobs=job("seed-ds-13b.json")) == []
    cfg = '{"train_batch_size": 1024, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}'
    assert findings(tmp_path, "deepspeed-batch", jobs={"ds.json": cfg}) == []
    auto = '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3}'
    assert findings(tmp_path, "deepspeed-batch", jobs={"ds.json": auto}) == []


# --- Kubernetes --------------------------------------------------------------------------------

def test_k8s_gpus(tmp_path):
    fs = findings(tmp_path, "k8s-gpus", jobs=job("bad-pytorchjob.yaml"))
    assert ("k8s-gpus", "error") in ids(fs) and any("Pending" in f.title for f in fs)
    assert findings(tmp_path, "k8s-gpus", jobs=job("seed-infer-pod.yaml")) == []


def test_k8s_nproc(tmp_path):
    text = (JOBS / "bad-pytorchjob.yaml").read_text().replace("nvidia.com/gpu: 16", "nvidia.com/gpu: 8")
    fs = findings(tmp_path, "k8s-gpus", jobs={"pj.yaml": text})
    assert {f.title.split(":")[0] for f in fs} >= {"PyTorchJob train-70b", "torchrun --nproc_per_node=16 in a pod with 8 GPUs"}


# --- checkpoint interval -----------------------------------------------------------------------

def test_interval_far_from_optimal(tmp_path):
    [f] = findings(tmp_path, "checkpoint-interval", checkpoint_interval_s=60)
    assert f.evidence["ratio"] < 0.5 and f.evidence["goodput"] < f.evidence["optimal_goodput"]
    [f] = findings(tmp_path, "checkpoint-interval", jobs={"r.txt": "torchrun train.py --checkpoint-interval 1m\n"})
    assert f.where.endswith("r.txt:1") and f.evidence["interval_s"] == 60


def test_interval_from_save_interval_steps(tmp_path):
    [f] = findings(tmp_path, "checkpoint-interval", jobs={"r.txt": "torchrun train.py --save-interval 1\n"})
    assert "--save-interval 1 x" in f.title


def test_interval_near_optimal_or_absent(tmp_path):
    assert findings(tmp_path, "checkpoint-interval") == []
    best = reliability_plan(ClusterSpec.model_validate(BASE), load_model_spec(SMALL_MODEL)).best.optimal.interval_s
    assert findings(tmp_path, "checkpoint-interval", checkpoint_interval_s=best * 1.5) == []


def test_interval_unreadable(tmp_path):
    [f] = findings(tmp_path, "checkpoint-interval", jobs={"r.txt": "torchrun train.py --checkpoint-interval soon\n"})
    assert f.severity == "error" and "soon" in f.title


# --- unparseable files -------------------------------------------------------------------------

def test_parse_problems_are_findings_with_lines(tmp_path):
    fs = findings(tmp_path, "job-parse", jobs={**job("broken-ds.json"), **job("bad-nccl.env"),
                                               "q.sh": "#!/bin/bash\nsrun python 'unclosed\n"})
    where = sorted(f.where.rsplit("/", 1)[-1] for f in fs)
    assert where == ["bad-nccl.env:4", "broken-ds.json:5", "q.sh:2"]
    assert all(f.severity == "error" for f in fs)


def test_good_files_parse(tmp_path):
    good = {**job("good-train-70b.sbatch"), **job("good-nccl.env"), **job("seed-ds-13b.json"),
            **job("seed-infer-pod.yaml"), **job("torchrun.txt")}
    assert findings(tmp_path, "job-parse", jobs=good) == []


def test_deepspeed_batch_with_more_model_parallel_ranks_than_gpus_is_a_finding(tmp_path):
    # Fuzz finding: dp = world // (tp x pp) was 0 and divided by zero.
    cfg = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4}'
    run = {"run.txt": "torchrun --nnodes=1 --nproc_per_node=8 train.py --tensor-model-parallel-size 64\n"}
    [f] = findings(tmp_path, "deepspeed-batch", jobs={"ds.json": cfg, **run})
    assert f.severity == "error" and "exceeds the world size" in f.title


# --- checkpoints of a training job (issue 22) -------------------------------------------------------

TRAIN = """#!/bin/bash
#SBATCH --nodes=4
#SBATCH --gres=gpu:8
#SBATCH --exclusive
{time}
srun torchrun --nproc-per-node=8 pretrain_gpt.py --tensor-model-parallel-size=8 {ckpt}
"""


def train_job(time="#SBATCH --time=48:00:00", ckpt=""):
    return {"train.sbatch": TRAIN.format(time=time, ckpt=ckpt)}


def test_training_job_that_never_checkpoints(tmp_path):
    # 70B on 32 GPUs takes far longer than 48 h: nothing carries over to the next job.
    [f] = findings(tmp_path, "training-checkpoint", jobs=train_job(), model="llama3-70b")
    assert f.severity == "error" and "never checkpoints" in f.title and f.where.endswith("train.sbatch:6")
    assert f.evidence["time_to_train_s"] > f.evidence["time_limit_s"] == 48 * 3600
    # No time limit: a failure still loses everything (a warning).
    [f] = findings(tmp_path, "training-checkpoint", jobs=train_job(time=""), model="llama3-70b")
    assert f.severity == "warning"


def test_time_limit_that_never_reaches_a_checkpoint(tmp_path):
    # 100000 iterations of a multi-second step: far beyond 48 h.
    [f] = findings(tmp_path, "training-checkpoint", jobs=train_job(ckpt="--save /c --load /c --save-interval=100000"),
                   model="llama3-70b")
    assert f.severity == "error" and "never reaches a checkpoint" in f.title
    assert f.evidence["interval_s"] > f.evidence["time_limit_s"]
    # Megatron-LM saving before the limit, or a reachable interval: clean.
    for ckpt in ("--save /c --save-interval=100000 --exit-duration-in-mins=2870", "--save /c --save-interval=10",
                 "--checkpoint-interval 30m"):
        assert findings(tmp_path, "training-checkpoint", jobs=train_job(ckpt=ckpt), model="llama3-70b") == [], ckpt
    # A benchmark is not a training job.
    bench = {"b.sbatch": "#!/bin/bash\n#SBATCH --nodes=2\nsrun all_reduce_perf -b 1M -e 1G\n"}
    assert findings(tmp_path, "training-checkpoint", jobs=bench) == []


def test_generated_job_checkpoints_within_its_time_limit(tmp_path):
    """What `generate slurm` writes passes, even with a time limit shorter than Daly's interval."""
    import json
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "cli"))
    from tests_cli_helpers import run
    plan = run("plan", "train", "--gpu", "H200:8", "--nodes", "4", "--model", "llama3-70b", "--tokens", "1T",
               "--json", check_rc=0)
    (tmp_path / "p.json").write_text(plan.stdout)
    assert json.loads(plan.stdout)["time_to_train_s"] > 4 * 3600
    for time in ("48:00:00", "4:00:00"):
        out = run("generate", "slurm", str(tmp_path / "p.json"), "--time", time, check_rc=0).stdout
        assert "--exit-duration-in-mins=" in out and "--save-interval=" in out
        assert findings(tmp_path, "training-checkpoint", jobs={"g.sbatch": out}, model="llama3-70b") == [], time


# --- impossible or ranged #SBATCH --nodes (issue 23 item 7) ---------------------------------------

def _nodes_job(nodes: str, exclusive: str = "") -> dict[str, str]:
    return {"j.sbatch": SBATCH.format(tasks="8", gres="gpu:8", exclusive=exclusive, launch="python")
            .replace("--nodes=4", f"--nodes={nodes}")}


def test_exclusive_reads_nodes_as_a_range(tmp_path):
    """`--nodes=4-2` was read as 4 nodes; a MIN-MAX range spans nodes when MAX > 1."""
    [f] = findings(tmp_path, "sbatch-exclusive", jobs=_nodes_job("4-2"))
    assert f.severity == "error" and "--nodes=4-2" in f.title and "minimum 4 above maximum 2" in f.title
    [f] = findings(tmp_path, "sbatch-exclusive", jobs=_nodes_job("1-3"))
    assert f.severity == "warning" and f.title.startswith("1-3-node job") and f.evidence == {"nodes_min": 1,
                                                                                               "nodes_max": 3}
    assert findings(tmp_path, "sbatch-exclusive", jobs=_nodes_job("1-1")) == []
    assert findings(tmp_path, "sbatch-exclusive", jobs=_nodes_job("1-3", "#SBATCH --exclusive")) == []


@pytest.mark.parametrize("nodes", ["-3", "0", "abc", str(2**64), "1e9", "4-2"])
def test_impossible_nodes_are_not_the_job_count(tmp_path, nodes):
    """The context says the count the estimates use is the pool's, not the job's, and why."""
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    (tmp_path / "j.sbatch").write_text(_nodes_job(nodes)["j.sbatch"])
    ctx = build_context(str(tmp_path / "c.yaml"), [str(tmp_path / "j.sbatch")], SMALL_MODEL)
    note = ctx.job_nodes_note
    assert ctx.job_nodes == 4 and note is not None and f"--nodes={nodes[:40]} is invalid" in note
    [f] = findings(tmp_path, "sbatch-exclusive", jobs=_nodes_job(nodes))
    assert f.severity == "error" and f"--nodes={nodes[:40]}" in f.title


def test_job_nodes_note_when_valid_or_above_the_pool(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    for nodes, used, note in (("2", 2, None), ("2-4", 2, None), ("64", 4, "the job asks 64 nodes, the pool has 4")):
        (tmp_path / "j.sbatch").write_text(_nodes_job(nodes)["j.sbatch"])
        ctx = build_context(str(tmp_path / "c.yaml"), [str(tmp_path / "j.sbatch")], SMALL_MODEL)
        assert (ctx.job_nodes, ctx.job_nodes_note) == (used, note)
