"""Running jobs as numpy columns (expected end, GPUs, GPU type), for reservations.

EASY backfill asks "when will enough GPUs of this type be free?": the answer is a
sort of the running jobs' expected ends. Keeping them in slot arrays makes that
one vectorised argsort instead of a Python loop over thousands of jobs.
"""

from __future__ import annotations

import numpy as np


class RunningTable:
    def __init__(self, capacity: int = 1024) -> None:
        self.end = np.full(capacity, np.inf)
        self.gpus = np.zeros(capacity)
        self.type = np.full(capacity, -1, dtype=np.int64)
        self.used = np.zeros(capacity, dtype=bool)
        self._slot: dict[int, int] = {}
        self._free: list[int] = list(range(capacity - 1, -1, -1))

    def _grow(self) -> None:
        n = len(self.end)
        self.end = np.concatenate((self.end, np.full(n, np.inf)))
        self.gpus = np.concatenate((self.gpus, np.zeros(n)))
        self.type = np.concatenate((self.type, np.full(n, -1, dtype=np.int64)))
        self.used = np.concatenate((self.used, np.zeros(n, dtype=bool)))
        self._free.extend(range(2 * n - 1, n - 1, -1))

    def add(self, job_id: int, end: float, gpus: float, type_idx: int) -> None:
        if not self._free:
            self._grow()
        s = self._free.pop()
        self._slot[job_id] = s
        self.end[s], self.gpus[s], self.type[s], self.used[s] = end, gpus, type_idx, True

    def remove(self, job_id: int) -> None:
        s = self._slot.pop(job_id, None)
        if s is not None:
            self.used[s] = False
            self.end[s] = np.inf
            self._free.append(s)

    def releases(self, type_idx: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(expected ends ascending, GPUs freed by then cumulatively) of jobs on `type_idx` (None: all)."""
        m = self.used if type_idx is None else self.used & (self.type == type_idx)
        ends = self.end[m]
        order = np.argsort(ends, kind="stable")
        return ends[order], np.cumsum(self.gpus[m][order])
