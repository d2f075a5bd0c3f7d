"""A real Slurm 22.05 on this host for the tests (recipe: ../shared/ENGINES.md): slurmctld and two
slurmd (gpu01, gpu02) with 8 fake H200 each, optionally slurmdbd + a private MariaDB for sacct.
Everything lives under one temporary folder with its own ports; daemons are stopped by their PIDs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "sbatch", "squeue", "sacct")


def why_not(accounting: bool = False) -> str | None:
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root"
    need = list(DAEMONS) + (["slurmdbd", "mariadbd", "mariadb-install-db", "sacctmgr"] if accounting else [])
    missing = [n for n in need if shutil.which(n) is None]
    if missing:
        return (f"not installed: {', '.join(missing)} (apt-get install slurmctld slurmd slurm-client"
                f"{' slurmdbd mariadb-server' if accounting else ''})")
    return None


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class SlurmCluster:
    def __init__(self, root: Path, accounting: bool = False, partitions: str | None = None) -> None:
        self.root, self.accounting = root, accounting
        # slurm.conf PartitionName lines over gpu[01-02] (default: one partition, gpu, no time limit)
        self.partitions = partitions or "PartitionName=gpu Nodes=gpu[01-02] Default=YES MaxTime=INFINITE State=UP"
        self.host = socket.gethostname()
        self.ctld_port, self.d1, self.d2, self.dbd_port, self.db_port = _free_ports(5)
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.pids: list[Path] = []
        self.procs: list[subprocess.Popen] = []

    # -- configuration -----------------------------------------------------------------
    def _write_conf(self) -> None:
        r = self.root
        for d in ("state", "spool", "log", "fakegpu"):
            (r / d).mkdir(parents=True, exist_ok=True)
        for i in range(8):
            dev = r / "fakegpu" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))
        acct = (f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                f"AccountingStoragePort={self.dbd_port}\nAccountingStorageTRES=gres/gpu,gres/gpu:h200\n"
                f"JobAcctGatherType=jobacct_gather/none\n"
                if self.accounting else "AccountingStorageType=accounting_storage/none\n")
        self.conf.write_text(f"""ClusterName=test
SlurmctldHost={self.host}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort={self.ctld_port}
SlurmdPort={self.d1}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/d-%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MessageTimeout=5
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=2
InactiveLimit=0
MinJobAge=300
{acct}NodeName=gpu[01-02] NodeHostname={self.host} NodeAddr=127.0.0.1 Port=[{self.d1},{self.d2}] CPUs=8 RealMemory=16000 Gres=gpu:h200:8 State=UNKNOWN
{self.partitions}
""")  # noqa: E501  (slurm.conf's node line stays one line)
        (r / "gres.conf").write_text(f"AutoDetect=off\nNodeName=gpu[01-02] Name=gpu Type=h200 "
                                     f"File={r}/fakegpu/nvidia[0-7]\n")

    # -- accounting ------------------------------------------------------------------
    def _start_db(self) -> None:
        r = self.root
        subprocess.run(["mariadb-install-db", f"--datadir={r}/mysql", "--user=root", "--auth-root-authentication-method=normal"],
                       check=True, capture_output=True, timeout=120)
        sock = r / "mysql.sock"
        self.procs.append(subprocess.Popen(
            ["mariadbd", f"--datadir={r}/mysql", "--user=root", "--bind-address=127.0.0.1", f"--port={self.db_port}",
             f"--socket={sock}", f"--pid-file={r}/mysql.pid", "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
             f"--log-error={r}/log/mysql.err"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait(lambda: sock.exists() and subprocess.run(
            ["mariadb", f"--socket={sock}", "-uroot", "-e", "select 1"], capture_output=True).returncode == 0,
            60, "MariaDB")
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        subprocess.run(["mariadb", f"--socket={sock}", "-uroot", "-e", sql], check=True, capture_output=True, timeout=30)
        dbd = r / "slurmdbd.conf"
        dbd.write_text(f"""AuthType=auth/none
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
PidFile={r}/slurmdbd.pid
LogFile={r}/log/slurmdbd.log
""")
        dbd.chmod(0o600)
        self._daemon(["slurmdbd"], r / "slurmdbd.pid")
        self._wait(lambda: self.run(["sacctmgr", "-n", "list", "cluster"], check=False).returncode == 0, 60,
                   "slurmdbd")
        for args in (["add", "cluster", "test"], ["add", "account", "research"],
                     ["add", "user", "root", "Account=research"]):
            self.run(["sacctmgr", "-i", *args], check=False)

    # -- lifecycle --------------------------------------------------------------------
    def _daemon(self, argv: list[str], pidfile: Path) -> None:
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.strip()}")
        self.pids.append(pidfile)

    def _wait(self, ready, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"{what} not ready after {timeout:g} s; logs in {self.root / 'log'}")

    def run(self, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(["timeout", str(int(timeout)), *argv], env=self.env, capture_output=True, text=True,
                              check=check, timeout=timeout + 5, cwd=self.root)  # job output lands here

    def wait_accounted(self, jobs: int, timeout: float = 240) -> None:
        """Until the queue is empty and accounting holds `jobs` jobs, none pending or running (a
        TIMEOUT job needs its limit and Slurm's next check; the records reach slurmdbd later)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            q = self.run(["squeue", "-h"], check=False).stdout.strip()
            hist = self.run(["sacct", "-a", "-X", "-P", "-n", "-o", "JobID,State"], check=False).stdout
            done = [s.split("|")[1] for s in hist.splitlines()]
            if not q and len(done) >= jobs and all(s not in ("PENDING", "RUNNING") for s in done):
                return
            time.sleep(2)

    def start(self) -> SlurmCluster:
        self._write_conf()
        if self.accounting:
            self._start_db()
        self._daemon(["slurmctld", "-i"], self.root / "slurmctld.pid")
        for n in ("gpu01", "gpu02"):
            self._daemon(["slurmd", "-N", n], self.root / f"slurmd-{n}.pid")

        def idle() -> bool:
            p = self.run(["sinfo", "-h", "-o", "%T"], check=False, timeout=10)
            return p.returncode == 0 and p.stdout.split() and all(s == "idle" for s in p.stdout.split())
        self._wait(idle, 60, "two idle slurmd nodes")
        return self

    def __enter__(self) -> SlurmCluster:
        """Started; a start that fails half-way stops the daemons it had started."""
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for pidfile in reversed(self.pids):
            try:
                pid = int(pidfile.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.procs:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
