"""Against a real Slurm 22.05 started here (slurmctld, two slurmd with fake H200s, slurmdbd and
MariaDB): a two-node benchmark job and its nccl-tests results, a generated job with a hostile
name, a killed job reported as failed, sacct history imported and replayed by the simulator, and
an unreachable controller that times out with a clear message."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_cluster import SlurmCluster, why_not
from tests_cli_helpers import EXE, ROOT

EVIL = 'x"; rm -rf ~; echo "'
_why = why_not(accounting=True)
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"), accounting=True)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def gpc(slurm, *args, timeout=240, extra_env=None):
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200", **(extra_env or {})}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=slurm.root)


def test_two_node_benchmark_results_come_back(slurm):
    pytest.importorskip("torch")
    t0 = time.monotonic()
    p = gpc(slurm, "slurm", "bench", "--nodes", "2", "--ntasks-per-node", "1", "--gres", "gpu:h200:8",
            "--master-addr", "127.0.0.1", "-b", "1M", "-e", "4M", "-f", "4", "--iters", "3", "--poll", "0.5",
            "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    print(f"slurm bench round trip {time.monotonic() - t0:.1f} s", file=sys.stderr)
    assert rep["state"] == "COMPLETED" and rep["failed"] is False
    bench = rep["bench"]
    assert bench["world_size"] == 2 and bench["nodes"] == 2 and bench["launcher"] == "srun"
    assert sorted(bench["node_ranks"]) == ["gpu01", "gpu02"] and bench["wrong_total"] == 0
    assert [r["size_bytes"] for r in bench["rows"]] == [1 << 20, 1 << 22]
    table = gpc(slurm, "slurm", "bench", "--nodes", "2", "--master-addr", "127.0.0.1", "-b", "1M", "-e", "1M",
                "--iters", "2", "--poll", "0.5")
    assert table.returncode == 0 and "#wrong" in table.stdout and "2 ranks on 2 node(s)" in table.stdout


def test_generated_job_with_hostile_name_runs(slurm, tmp_path):
    plan = gpc(slurm, "plan", "train", "--gpu", "H200:8", "--nodes", "2", "--model", "llama2-7b", "--tokens", "10B",
               "--json")
    assert plan.returncode == 0, plan.stderr
    (tmp_path / "plan.json").write_text(plan.stdout)
    script = tmp_path / "job.sbatch"
    g = gpc(slurm, "generate", "slurm", str(tmp_path / "plan.json"), "--job-name", EVIL, "--gres-type", "h200",
            "--time", "10:00", "-o", str(script))
    assert g.returncode == 0, g.stderr
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "torchrun").write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path}/argv-$SLURMD_NODENAME\n')
    (fake / "torchrun").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    p = gpc(slurm, "slurm", "submit", str(script), "--poll", "0.5", "--json", extra_env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    assert rep["state"] == "COMPLETED" and rep["name"] == EVIL
    for node in ("gpu01", "gpu02"):
        argv = (tmp_path / f"argv-{node}").read_text().splitlines()
        assert "--nnodes=2" in argv and "--nproc-per-node=8" in argv and "--rdzv-endpoint=gpu01:29500" in argv
    assert (tmp_path).exists() and Path(os.environ.get("HOME", "/root")).exists()


def test_killed_job_is_reported_failed(slurm, tmp_path):
    script = tmp_path / "sleep.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=victim\n#SBATCH --gres=gpu:h200:1\nsleep 300\n")
    env = {**slurm.env, "NO_COLOR": "1"}
    follower = subprocess.Popen([str(EXE), "slurm", "submit", str(script), "--poll", "0.5", "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        job = None
        for _ in range(120):
            q = slurm.run(["squeue", "-h", "-n", "victim", "-t", "RUNNING", "-o", "%i"], check=False)
            if q.stdout.strip():
                job = q.stdout.split()[0]
                break
            time.sleep(0.5)
        assert job, "the job never started"
        slurm.run(["scancel", job])
        out, err = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 1, out + err
    rep = json.loads(out)
    assert rep["state"] == "CANCELLED" and rep["failed"] is True


def test_sacct_history_imported_and_replayed(slurm, tmp_path):
    for _ in range(2):
        slurm.run(["sbatch", "--gres=gpu:h200:4", "--wrap", "sleep 1"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until slurmdbd has every job, ended
        q = slurm.run(["squeue", "-h"], check=False).stdout.strip()
        hist = slurm.run(["sacct", "-a", "-X", "-P", "-n", "-o", "JobID,State"], check=False).stdout
        if not q and hist and all(s.split("|")[1] not in ("PENDING", "RUNNING") for s in hist.splitlines()):
            break
        time.sleep(1)
    trace, scen = tmp_path / "sacct.txt", tmp_path / "replay.yaml"
    p = gpc(slurm, "slurm", "import", "-o", str(trace), "--scenario", str(scen), "--cluster",
            str(ROOT / "tests/integration/data/slurm-2node.yaml"), "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    ran = [ln.split("|") for ln in trace.read_text().splitlines()[1:]]
    gpu_jobs = [r for r in ran if "gres/gpu" in r[10] and r[5] not in ("", "Unknown", "None")]
    assert rep["jobs"] == len(gpu_jobs) >= 2
    assert rep["states"].get("COMPLETED", 0) >= 2
    from gpucluster.sim.traces.sacct import read_sacct
    names = {j.name for j in read_sacct(str(trace)).jobs}
    assert names == {r[0] for r in gpu_jobs}
    if "simulate" in gpc(slurm, "--help").stdout:
        sim = gpc(slurm, "simulate", "run", str(scen), "--json")
        assert sim.returncode == 0, sim.stderr
        s = json.loads(sim.stdout)
        assert s["jobs"]["total"] == rep["jobs"] and s["jobs"]["completed"] == rep["jobs"]


def test_unreachable_slurm_times_out(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nAuthType=auth/none\n"
                    "CredType=cred/none\nMessageTimeout=60\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    t0 = time.monotonic()
    p = subprocess.run([str(EXE), "slurm", "status", "1", "--timeout", "3"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert time.monotonic() - t0 < 30
    assert p.returncode == 2 and "Slurm" in p.stderr and "Traceback" not in p.stderr, p.stderr
