"""Against a real Slurm 22.05 started here (slurmctld, two slurmd with fake H200s, slurmdbd and
MariaDB): a two-node benchmark job and its nccl-tests results, a generated job with a hostile
name, a job that writes to the default output path and exits 3 (its output and exit code come
back, also from sacct alone), a plan submitted with --gres-type/--time/--partition/--account
and no temporary file left, a killed job reported as failed, sacct history (a failed job in it)
imported and replayed by the simulator, and an unreachable controller that times out with a
clear message."""

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
# A generated Megatron-LM job stops until its data, tokenizer and checkpoint directory are set,
# and chains a successor job unless told it is the last (test_slurm_chain.py tests the chain).
FILLED = {"DATA_PATH": "/data/x", "TOKENIZER_MODEL": "/tok", "CHECKPOINT_DIR": "/nonexistent/ckpt",
          "GPUCLUSTER_CHAIN_LEFT": "1"}
_why = why_not(accounting=True)
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("slurm"), accounting=True) as c:
        yield c


def gpc(slurm, *args, timeout=240, extra_env=None):
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200", **(extra_env or {})}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=slurm.root)


def test_two_node_benchmark_results_come_back(slurm):
    pytest.importorskip("torch")
    t0 = time.monotonic()           # printed for docs/engines.md, never asserted
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
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp_path), **FILLED}
    p = gpc(slurm, "slurm", "submit", str(script), "--poll", "0.5", "--json", extra_env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    assert rep["state"] == "COMPLETED" and rep["name"] == EVIL
    for node in ("gpu01", "gpu02"):
        argv = (tmp_path / f"argv-{node}").read_text().splitlines()
        assert "--nnodes=2" in argv and "--nproc-per-node=8" in argv and "--rdzv-endpoint=gpu01:29500" in argv
    assert (tmp_path).exists() and Path(os.environ.get("HOME", "/root")).exists()


def _shims(tmp_path: Path, *names: str) -> dict:
    """PATH with `names` replaced by commands that fail: what the client sees once the controller
    has forgotten the job (MinJobAge) and only sacct still knows it."""
    d = tmp_path / "forgetful"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_text("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n")
        (d / n).chmod(0o755)
    return {"PATH": f"{d}:{os.environ['PATH']}"}


def test_exit_code_and_default_output_come_back(slurm, tmp_path):
    """No --output in the script: 22.05's squeue --json says standard_output "" and the exit code
    is the raw wait status 768; the job's output and `exit 3` must still be reported as such."""
    script = tmp_path / "exit3.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=exit3\n#SBATCH --gres=gpu:h200:1\n"
                      "echo to-stdout\necho to-stderr >&2\nexit 3\n")
    env = {**slurm.env, "NO_COLOR": "1", "COLUMNS": "200"}
    p = subprocess.run([str(EXE), "slurm", "submit", str(script), "--poll", "0.5", "--json"], capture_output=True,
                       text=True, env=env, timeout=240, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    job = rep["job_id"]
    assert rep["state"] == "FAILED" and rep["failed"] is True
    assert rep["exit_code"] == 3 and rep["signal"] is None and rep["slurm_exit_code"] == "3:0"
    assert rep["stdout"] == str(tmp_path / f"slurm-{job}.out")          # Slurm's default name and place
    assert "to-stdout" in rep["stdout_tail"] and "to-stderr" in rep["stdout_tail"]
    for source, shims in (("squeue", ()), ("sacct", ("squeue", "scontrol"))):
        st = gpc(slurm, "slurm", "status", str(job), "--json", extra_env=_shims(tmp_path, *shims))
        assert st.returncode == 0, st.stderr
        got = json.loads(st.stdout)
        assert (got["source"], got["state"], got["exit_code"]) == (source, "FAILED", 3), got
        text = gpc(slurm, "slurm", "status", str(job), extra_env=_shims(tmp_path, *shims)).stdout
        assert f"from {source}" in text and "exit code 3" in text and "768" not in text
    plain = subprocess.run([str(EXE), "slurm", "submit", str(script), "--poll", "0.5"], capture_output=True,
                           text=True, env=env, timeout=240, cwd=tmp_path)
    assert plain.returncode == 1
    assert "FAILED, exit code 3" in plain.stdout and "768" not in plain.stdout and "| to-stderr" in plain.stdout


def test_killed_by_a_signal_is_reported_as_such(slurm, tmp_path):
    script = tmp_path / "sig.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=sig\nkill -9 $$\n")
    p = gpc(slurm, "slurm", "submit", str(script), "--poll", "0.5", "--json")
    rep = json.loads(p.stdout)
    assert p.returncode == 1 and rep["state"] == "FAILED"
    assert rep["signal"] == 9 and rep["exit_code"] is None and rep["slurm_exit_code"] == "0:9"
    st = json.loads(gpc(slurm, "slurm", "status", str(rep["job_id"]), "--json",
                        extra_env=_shims(tmp_path, "squeue", "scontrol")).stdout)
    assert st["source"] == "sacct" and st["signal"] == 9


def test_plan_submit_takes_the_generate_options_and_leaves_no_file(slurm, tmp_path):
    plan = gpc(slurm, "plan", "train", "--gpu", "H200:8", "--nodes", "1", "--model", "llama2-7b", "--tokens", "1B",
               "--json")
    assert plan.returncode == 0, plan.stderr
    (tmp_path / "plan.json").write_text(plan.stdout)
    fake, tmp = tmp_path / "bin", tmp_path / "tmp"
    fake.mkdir()
    tmp.mkdir()
    (fake / "torchrun").write_text("#!/bin/bash\necho torchrun-ran\n")
    (fake / "torchrun").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "TMPDIR": str(tmp), **FILLED}
    p = gpc(slurm, "slurm", "submit", str(tmp_path / "plan.json"), "--gres-type", "h200", "--time", "7:00",
            "--partition", "gpu", "--account", "research", "--poll", "0.5", "--json", extra_env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    assert rep["state"] == "COMPLETED" and "torchrun-ran" in rep["stdout_tail"]
    job = slurm.run(["scontrol", "show", "job", "-o", str(rep["job_id"])]).stdout
    assert "Partition=gpu" in job and "Account=research" in job and "TimeLimit=00:07:00" in job
    assert "gpu:h200:8" in job
    assert list(tmp.iterdir()) == []                      # the generated sbatch file is gone
    bad = gpc(slurm, "slurm", "submit", str(tmp_path / "plan.json"), "--partition", "nosuch", "--poll", "0.5",
              extra_env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "sbatch failed" in bad.stderr and list(tmp.iterdir()) == []    # gone after a refusal too
    script = tmp_path / "x.sbatch"
    script.write_text("#!/bin/bash\ntrue\n")
    wrong = gpc(slurm, "slurm", "submit", str(script), "--gres-type", "h200")
    assert wrong.returncode == 2 and "--gres-type" in wrong.stderr and "Traceback" not in wrong.stderr
    evil = gpc(slurm, "slurm", "submit", str(tmp_path / "plan.json"), "--account", "a\nb")
    assert evil.returncode == 2 and "--account" in evil.stderr and list(tmp.iterdir()) == []


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


def _history_of(slurm, scripts: list[list[str]]) -> None:
    ids = {slurm.run(["sbatch", "--parsable", *argv]).stdout.strip().split(";")[0] for argv in scripts}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until slurmdbd has every job submitted here, ended
        q = slurm.run(["squeue", "-h"], check=False).stdout.strip()
        hist = slurm.run(["sacct", "-a", "-X", "-P", "-n", "-o", "JobID,State"], check=False).stdout
        states = dict(ln.split("|")[:2] for ln in hist.splitlines() if "|" in ln)
        # squeue empties before slurmdbd has recorded the last jobs on a busy machine: wait for ours by id.
        if not q and ids <= states.keys() and all(v not in ("PENDING", "RUNNING") for v in states.values()):
            break
        time.sleep(1)


def test_sacct_history_imported_and_replayed(slurm, tmp_path):
    _history_of(slurm, [["--gres=gpu:h200:4", "--wrap", "sleep 1"]] * 2
                + [["--gres=gpu:h200:2", "--job-name=fails", "--time=5:00", "--wrap", "sleep 1; exit 3"]])
    trace, scen = tmp_path / "sacct.txt", tmp_path / "replay.yaml"
    p = gpc(slurm, "slurm", "import", "-o", str(trace), "--scenario", str(scen), "--cluster",
            str(ROOT / "tests/integration/data/slurm-2node.yaml"), "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    lines = trace.read_text().splitlines()
    head = lines[0].split("|")
    ran = [dict(zip(head, ln.split("|"), strict=False)) for ln in lines[1:]]
    gpu_jobs = [r for r in ran if "gres/gpu" in r["AllocTRES"] and r["Start"] not in ("", "Unknown", "None")]
    assert rep["jobs"] == len(gpu_jobs) >= 3
    assert rep["states"].get("COMPLETED", 0) >= 2 and rep["states"].get("FAILED", 0) >= 1
    from gpucluster.sim.traces.sacct import FAILED_STATES, read_sacct
    assert rep["replay_states"].get("failed", 0) == sum(r["State"].split()[0] in FAILED_STATES for r in gpu_jobs)
    jobs = {j.name: j for j in read_sacct(str(trace)).jobs}
    assert set(jobs) == {r["JobID"] for r in gpu_jobs}
    failed = [jobs[r["JobID"]] for r in gpu_jobs if r["JobName"] == "fails"]
    assert failed and all(j.state == "FAILED" and j.final_state == "failed" and j.exit_code == 3 for j in failed)
    assert all(j.partition == "gpu" and j.qos == "normal" and j.time_limit_s == 300 for j in failed)
    assert all(j.wait_s >= 0 for j in jobs.values())
    if "simulate" in gpc(slurm, "--help").stdout:
        sim = gpc(slurm, "simulate", "run", str(scen), "--json")
        assert sim.returncode == 0, sim.stderr
        s = json.loads(sim.stdout)
        assert s["jobs"]["total"] == rep["jobs"]


def test_failed_job_replays_as_failed(slurm, tmp_path):
    _history_of(slurm, [["--gres=gpu:h200:2", "--job-name=fails", "--wrap", "sleep 1; exit 3"]])
    trace, scen = tmp_path / "sacct.txt", tmp_path / "replay.yaml"
    p = gpc(slurm, "slurm", "import", "-o", str(trace), "--scenario", str(scen), "--cluster",
            str(ROOT / "tests/integration/data/slurm-2node.yaml"), "--json")
    rep = json.loads(p.stdout)
    s = json.loads(gpc(slurm, "simulate", "run", str(scen), "--json").stdout)
    assert s["jobs"]["failed"] == rep["replay_states"]["failed"] >= 1
    assert s["jobs"]["completed"] == rep["replay_states"].get("completed", 0)
    assert s["jobs"]["cancelled"] == rep["replay_states"].get("cancelled", 0)


def test_unreachable_slurm_times_out(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nAuthType=auth/none\n"
                    "CredType=cred/none\nMessageTimeout=60\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    # No wall-clock assertion: the client's own 3 s timeout must end it with its message; the
    # subprocess limit only keeps a hang (MessageTimeout=60 per retry) from stalling the suite.
    p = subprocess.run([str(EXE), "slurm", "status", "1", "--timeout", "3"], capture_output=True, text=True, env=env,
                       timeout=180)
    assert p.returncode == 2 and "did not answer within 3 s" in p.stderr and "Traceback" not in p.stderr, p.stderr
