"""The discrete-event kernel: a clock, a heap of events and seeded random streams.

Events are ordered by (time, priority, sequence number) as in SimPy: two events at
the same time run in priority order (lower first), and two with the same priority
in the order they were scheduled, so a run is a pure function of its inputs and
seed. The kernel knows nothing about GPUs or jobs: a handler is any callable
`handler(payload)`, so a cluster scheduler and an inference batcher run on it
alike. Per event the work is one heap push and one pop, O(log n).

Cancellation is lazy: `cancel(token)` marks the token and the kernel drops it when
it reaches the top of the heap (the usual heapq recipe), so cancelling is O(1).
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

Handler = Callable[[Any], None]


class Kernel:
    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.seed = int(seed)
        self._heap: list[tuple[float, int, int, Handler, Any]] = []
        self._seq = 0
        self._cancelled: set[int] = set()
        self._live: set[int] = set()     # scheduled, not yet run or cancelled
        self._streams: dict[str, np.random.Generator] = {}
        self.events = 0             # events handled (cancelled ones not counted)
        self.stop_requested = False  # set from outside (e.g. a SIGINT handler); run() returns early

    # -- scheduling -----------------------------------------------------------------
    def at(self, time: float, priority: int, handler: Handler, payload: Any = None) -> int:
        """Schedule `handler(payload)` at absolute `time`; returns a token for `cancel`."""
        if time < self.now:
            raise ValueError(f"event in the past: {time} < now {self.now}")
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, (time, priority, seq, handler, payload))
        self._live.add(seq)
        return seq

    def after(self, delay: float, priority: int, handler: Handler, payload: Any = None) -> int:
        return self.at(self.now + delay, priority, handler, payload)

    def cancel(self, token: int | None) -> None:
        """Cancel a scheduled event; a token that already ran (or was cancelled) is ignored, so
        that `pending()` stays exact (a heap cannot tell cheaply whether a token is still in
        it, so the kernel keeps the set of live tokens)."""
        if token is not None and token in self._live:
            self._live.discard(token)
            self._cancelled.add(token)

    def pending(self) -> int:
        return len(self._heap) - len(self._cancelled)

    # -- running --------------------------------------------------------------------
    def run(self, until: float | None = None, *, on_progress: Callable[[float], None] | None = None,
            progress_every: int = 20000) -> bool:
        """Handle events in order until the heap is empty, the next event is after
        `until` (the clock is then set to `until`), or `stop_requested` is set.
        Returns True when stopped early by `stop_requested` (results are partial)."""
        heap, dead, live, pop = self._heap, self._cancelled, self._live, heapq.heappop
        limit = float("inf") if until is None else until
        n = self.events
        next_report = n + progress_every
        while heap:
            if self.stop_requested:
                self.events = n
                return True
            time, _prio, seq, handler, payload = heap[0]
            if seq in dead:
                pop(heap)
                dead.discard(seq)
                continue
            if time > limit:
                break
            pop(heap)
            live.discard(seq)
            self.now = time
            handler(payload)
            n += 1
            if on_progress is not None and n >= next_report:
                next_report = n + progress_every
                on_progress(time)
        self.events = n
        if until is not None and self.now < until:
            self.now = until
        return False

    # -- randomness -----------------------------------------------------------------
    def stream(self, name: str) -> np.random.Generator:
        """An independent random stream per purpose ("arrivals:train", "failures", ...),
        derived from the seed and the name, so adding a stream does not shift the others."""
        rng = self._streams.get(name)
        if rng is None:
            rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
            self._streams[name] = rng
        return rng
