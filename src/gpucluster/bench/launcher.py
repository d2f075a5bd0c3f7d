"""`--local N`: start N benchmark ranks on this machine (torchrun's variables, one free port on
loopback), wait with a timeout, and return rank 0's result."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpucluster.bench.collective import BenchConfig
from gpucluster.errors import UserError


_TORCHRUN_PREFIXES = ("TORCHELASTIC_", "TORCH_ELASTIC_")
_TORCHRUN_VARS = {"GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "LOCAL_WORLD_SIZE"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def launch_local(cfg: BenchConfig, nprocs: int, *, timeout_s: float = 600, node: str = "local",
                 extra_env: dict[str, str] | None = None) -> dict:
    if nprocs < 1:
        raise UserError(f"must be >= 1, got {nprocs}", field="--local")
    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-") as tmp:
        conf, out = Path(tmp) / "config.json", Path(tmp) / "result.json"
        conf.write_text(json.dumps(cfg.to_json()))
        port = free_port()
        procs = []
        # a group of its own: nothing of an enclosing torchrun (its agent store, group ranks) leaks in,
        # or the ranks would wait on the agent's store instead of starting theirs
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(_TORCHRUN_PREFIXES)
                     and k not in _TORCHRUN_VARS}
        for r in range(nprocs):
            env = {**inherited, **(extra_env or {}), "RANK": str(r), "WORLD_SIZE": str(nprocs),
                   "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                   "GPUCLUSTER_NODE": node, "GPUCLUSTER_LAUNCHER": "local",
                   "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            log = open(Path(tmp) / f"rank{r}.log", "w")  # noqa: SIM115 (the rank's stdout: closed when it exits)
            procs.append((subprocess.Popen([sys.executable, "-m", "gpucluster.bench.worker", str(conf), str(out)],
                                           env=env, stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.monotonic() + timeout_s
        try:
            for p, _ in procs:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise UserError(f"the {nprocs} local ranks did not finish within {timeout_s:g} s") from None
        finally:
            for p, log in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                log.close()
        failed = [(r, p.returncode) for r, (p, _) in enumerate(procs) if p.returncode]
        if failed:
            r, code = failed[0]
            tail = (Path(tmp) / f"rank{r}.log").read_text()[-2000:]
            raise UserError(f"rank {r} of {nprocs} exited with {code}: {tail.strip().splitlines()[-1] if tail.strip() else ''}")
        return json.loads(out.read_text())
