"""Running a program we do not control (sacct, squeue, scontrol, sbatch, nccl-tests) as
untrusted input: its output is bytes of any encoding and any size, and it may never end.

`run_bounded` reads stdout up to a cap (past it the program is killed and the call refused:
an endless `sacct` costs the cap, not the machine's memory), keeps the first part of stderr,
stops at a deadline, and decodes both as UTF-8 with replacement (a Latin-1 job name or a
binary byte is a replacement character, never a UnicodeDecodeError). The program runs in a
session of its own so that a child it left behind holding the pipe is killed with it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

STDERR_CAP = 64 << 10     # what a one-line error quotes needs far less


class OutputTooLarge(Exception):
    """The program printed more than the cap; it was killed."""

    def __init__(self, argv0: str, cap: int) -> None:
        self.argv0, self.cap = argv0, cap
        super().__init__(f"{argv0} printed more than {cap / 2**20:g} MiB")


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.kill()
    except ProcessLookupError:
        pass
    p.wait()


def run_bounded(argv: list[str], *, timeout_s: float, cap_bytes: int, env: dict[str, str] | None = None,
                stderr_cap: int = STDERR_CAP) -> Finished:
    """Run `argv` with no input; FileNotFoundError when it does not exist, subprocess.TimeoutExpired
    past `timeout_s`, OutputTooLarge past `cap_bytes` of stdout (the program is killed in both)."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, start_new_session=True)
    assert p.stdout is not None and p.stderr is not None
    out_fd, err_fd = p.stdout.fileno(), p.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    caps = {out_fd: cap_bytes, err_fd: stderr_cap}
    deadline = time.monotonic() + timeout_s
    sel = selectors.DefaultSelector()
    try:
        sel.register(out_fd, selectors.EVENT_READ)
        sel.register(err_fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(p)
                raise subprocess.TimeoutExpired(argv, timeout_s)
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                room = caps[key.fd] - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(chunk) > room and key.fd == out_fd:
                    _kill(p)
                    raise OutputTooLarge(os.path.basename(argv[0]), cap_bytes)
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(p)
            raise
    except BaseException:
        if p.poll() is None:
            _kill(p)
        raise
    finally:
        sel.close()
        p.stdout.close()
        p.stderr.close()
    return Finished(p.returncode, bufs[out_fd].decode("utf-8", "replace"), bufs[err_fd].decode("utf-8", "replace"))
