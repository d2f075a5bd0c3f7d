"""The wait queue, kept sorted by the policy's key (bisect insertion, lazy removal).

A started or cancelled job stays in the list until the next compaction, so
starting k jobs from a queue of Q costs O(k) plus an occasional O(Q) sweep, not
O(k*Q). Iteration skips the dead entries.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from itertools import islice

from gpucluster.sim.jobs import PENDING, Job


class JobQueue:
    def __init__(self, key: Callable[[Job], tuple]) -> None:
        self._key = key
        self._items: list[tuple] = []   # (key..., seq, job)
        self._live = 0
        self._dead = 0

    def push(self, job: Job) -> None:
        bisect.insort(self._items, (*self._key(job), job.seq, job))
        self._live += 1

    def removed(self, job: Job) -> None:
        """Call after a queued job left the PENDING state (started or cancelled)."""
        self._live -= 1
        self._dead += 1
        if self._dead > 64 and self._dead > self._live:
            self._items = [e for e in self._items if e[-1].state == PENDING]
            self._dead = 0

    def __len__(self) -> int:
        return self._live

    def __bool__(self) -> bool:
        return self._live > 0

    def __iter__(self) -> Iterator[Job]:
        for e in self._items:
            job = e[-1]
            if job.state == PENDING:
                yield job

    def __getitem__(self, s: slice) -> list[Job]:
        if not isinstance(s, slice) or s.step not in (None, 1):
            raise TypeError("JobQueue supports slices only")
        return list(islice(iter(self), s.start, s.stop))

    def first(self) -> Job | None:
        return next(iter(self), None)
