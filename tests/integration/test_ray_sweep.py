"""A sweep on a real two-node Ray cluster on loopback (127.0.0.2 head, 127.0.0.3 worker): the
results equal the local run's and the tasks spread over both nodes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests_cli_helpers import EXE

pytest.importorskip("ray")
RAY = Path(sys.executable).parent / "ray"
pytestmark = pytest.mark.skipif(not RAY.exists() and shutil.which("ray") is None, reason="ray CLI not installed")

SWEEP = """name: ray-test
command: [plan, train]
base: {tokens: 10B, gpu: "H100:8"}
grid:
  nodes: [1, 2, 4]
  model: [llama2-7b, llama2-13b]
keep: [best.step_s, best.layout.dp, gpu_hours]
"""


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray")
    ray = str(RAY) if RAY.exists() else "ray"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = "26379"
    common = ["--num-cpus=2", "--num-gpus=8", "--disable-usage-stats"]
    try:
        subprocess.run([ray, "start", "--head", "--node-ip-address=127.0.0.2", f"--port={port}",
                        "--include-dashboard=false", f"--temp-dir={tmp}", *common], env=env, check=True,
                       capture_output=True, timeout=120)
        subprocess.run([ray, "start", f"--address=127.0.0.2:{port}", "--node-ip-address=127.0.0.3", *common],
                       env=env, check=True, capture_output=True, timeout=120)
        yield f"127.0.0.2:{port}", env
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_ray_two_nodes_equal_local(ray_cluster, tmp_path):
    address, env = ray_cluster
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP)
    env = {**env, "NO_COLOR": "1"}
    local = subprocess.run([str(EXE), "sweep", str(spec), "--json"], capture_output=True, text=True, env=env,
                           timeout=300)
    on_ray = subprocess.run([str(EXE), "sweep", str(spec), "--ray", address, "--json"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert local.returncode == 0, local.stderr
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    a, b = json.loads(local.stdout), json.loads(on_ray.stdout)
    assert a["tasks"] == b["tasks"] and b["ok"] == 6
    assert b["ray_nodes"] == 2
