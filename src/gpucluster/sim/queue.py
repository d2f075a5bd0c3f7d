"""The wait queue, kept sorted by the policy's key (bisect insertion, lazy removal).

A started or cancelled job stays in the list until the next compaction, so
starting k jobs from a queue of Q costs O(k) plus an occasional O(Q) sweep, not
O(k*Q). Iteration skips the dead entries. A job that leaves and comes back (preempted, then
queued again before a compaction) has two entries; only the one of its latest push is live.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from itertools import islice

from gpucluster.sim.jobs import PENDING, Job


class JobQueue:
    def __init__(self, key: Callable[[Job], tuple]) -> None:
        self._key = key
        self._items: list[tuple] = []   # (key..., seq, push number, job)
        self._push_of: dict[Job, int] = {}   # queued job -> the push number of its live entry
        self._pushes = 0
        self._live = 0
        self._dead = 0

    def push(self, job: Job) -> None:
        self._pushes += 1
        self._push_of[job] = self._pushes
        bisect.insort(self._items, (*self._key(job), job.seq, self._pushes, job))
        self._live += 1

    def removed(self, job: Job) -> None:
        """Call after a queued job left the PENDING state (started or cancelled)."""
        self._push_of.pop(job, None)
        self._live -= 1
        self._dead += 1
        if self._dead > 64 and self._dead > self._live:
            self._items = [e for e in self._items if self._is_live(e)]
            self._dead = 0

    def _is_live(self, entry: tuple) -> bool:
        job = entry[-1]
        return job.state == PENDING and self._push_of.get(job) == entry[-2]

    def __len__(self) -> int:
        return self._live

    def __bool__(self) -> bool:
        return self._live > 0

    def __iter__(self) -> Iterator[Job]:
        for e in self._items:
            if self._is_live(e):
                yield e[-1]

    def __getitem__(self, s: slice) -> list[Job]:
        if not isinstance(s, slice) or s.step not in (None, 1):
            raise TypeError("JobQueue supports slices only")
        return list(islice(iter(self), s.start, s.stop))

    def first(self) -> Job | None:
        return next(iter(self), None)
