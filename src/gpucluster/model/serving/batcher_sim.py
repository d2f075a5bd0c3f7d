"""A small discrete-event run of one replica's batcher, to check the queueing model.

Requests arrive as a Poisson process with lengths drawn from the traffic's distributions
(the same seed gives the same run). The engine's iteration
times come from the same step model (queueing.StepModel), so the run checks the queueing
formulas, not the physics. Three batchers:

- continuous: iteration-level scheduling (Orca, vLLM): at each iteration boundary waiting
  prompts join (up to max_batch running sequences and a prefill token budget, at least
  one prompt), finished sequences leave;
- window: dynamic batching as the seed describes it: collect requests for `window_s`
  after the first one waits, then run them as one static batch to completion (the batch
  decodes until its longest request is done); requests arriving meanwhile wait;
- single: one request at a time (a window of 0 and a batch of 1).

Events run on the simulator's kernel (sim/kernel.py): ordered by (time, priority,
sequence number) as SimPy orders them, so equal times resolve deterministically (an
iteration that ends at an arrival's instant is handled first), with one seeded random
stream per purpose (arrivals, prompt lengths, output lengths).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gpucluster.model.serving.queueing import PREFILL_TOKEN_BUDGET, StepModel, Traffic
from gpucluster.events import Kernel

Mode = Literal["continuous", "window", "single"]
ENGINE, ARRIVAL = 0, 1          # priorities: engine events before arrivals at the same instant


@dataclass(eq=False)
class _Req:
    arrival: float
    prompt: int
    output: int
    made: int = 0
    first: float | None = None
    done: float | None = None


@dataclass
class SimResult:
    mode: str
    requests: int               # measured (after warm-up)
    ttft_p50: float
    ttft_p99: float
    tpot_p50: float | None
    tpot_p99: float | None
    tokens_per_s: float         # output tokens over the measured span
    mean_batch: float           # sequences per iteration, time-weighted
    ttfts: list[float] = field(default_factory=list, repr=False)


class _Batcher:
    def __init__(self, step: StepModel, max_batch: int, mode: Mode, window_s: float, seed: int) -> None:
        self.step, self.mode, self.window = step, mode, window_s
        self.max_batch = 1 if mode == "single" else max_batch
        self.loop = Kernel(seed)
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.busy = False
        self.window_armed = False
        self.batch_time = 0.0        # integral of batch size over busy time
        # engines.yaml first_token: decode_step: the prefill only fills the KV cache, and every
        # output token, the first included, comes from a decode step
        rep = getattr(step, "rep", None)
        self.first_step = bool(rep is not None and rep.kernels.engine.first_token_step)

    # -- arrivals -------------------------------------------------------------------
    def arrive(self, req: _Req) -> None:
        self.waiting.append(req)
        if self.busy:
            return
        if self.mode == "continuous":
            self.iterate()
        elif not self.window_armed:
            self.arm()

    def arm(self) -> None:
        wait = 0.0 if self.mode == "single" else self.window
        self.window_armed = True
        self.loop.at(max(self.loop.now, self.waiting[0].arrival + wait), ENGINE, self.close_window)

    # -- continuous batching ---------------------------------------------------------
    def iterate(self, _: Any = None) -> None:
        admit: list[_Req] = []
        budget = PREFILL_TOKEN_BUDGET
        while self.waiting and len(self.running) + len(admit) < self.max_batch:
            if admit and self.waiting[0].prompt > budget:
                break
            r = self.waiting.popleft()
            budget -= r.prompt
            admit.append(r)
        n = len(self.running)
        if not admit and not n:
            self.busy = False
            return
        self.busy = True
        t = 0.0
        if n:
            t += self.step.decode(n, sum(r.prompt + r.made for r in self.running) / n)
        if admit:
            t += self.step.prefill(len(admit), sum(r.prompt for r in admit) / len(admit))
        self.batch_time += t * (n + len(admit))
        self.loop.at(self.loop.now + t, ENGINE, self.end_iteration, admit)

    def end_iteration(self, admit: list[_Req]) -> None:
        now = self.loop.now
        still = []
        for r in self.running:
            r.made += 1
            if r.first is None:
                r.first = now
            if r.made >= r.output:
                r.done = now
            else:
                still.append(r)
        for r in admit:
            if self.first_step:
                r.made = 0
                still.append(r)
                continue
            r.first, r.made = now, 1
            if r.output <= 1:
                r.done = now
            else:
                still.append(r)
        self.running = still
        self.iterate()

    # -- windowed static batches ------------------------------------------------------
    def close_window(self, _: Any = None) -> None:
        self.window_armed = False
        batch = [self.waiting.popleft() for _ in range(min(self.max_batch, len(self.waiting)))]
        self.busy = True
        k = len(batch)
        t = self.loop.now + self.step.prefill(k, sum(r.prompt for r in batch) / k)
        span = t - self.loop.now
        ctx = sum(r.prompt for r in batch) / k
        if self.first_step:     # the first token comes from a decode step after the prefill
            dt = self.step.decode(k, ctx)
            t, span = t + dt, span + dt
        for r in batch:
            r.first = t
        longest = max(r.output for r in batch)
        for i in range(1, longest):
            dt = self.step.decode(k, ctx + i)
            t, span = t + dt, span + dt
            for r in batch:
                if r.output == i + 1:
                    r.done = t
        for r in batch:
            if r.output <= 1:
                r.done = r.first
        self.batch_time += span * k
        self.loop.at(t, ENGINE, self.end_batch)

    def end_batch(self, _: Any = None) -> None:
        self.busy = False
        if self.waiting:
            self.arm()


def simulate(step: StepModel, traffic: Traffic, max_batch: int, *, mode: Mode = "continuous",
             window_s: float = 0.01, requests: int = 2000, seed: int = 0, warmup: float = 0.1) -> SimResult:
    """Run `requests` Poisson arrivals through one replica; percentiles over the requests after
    the first `warmup` fraction."""
    b = _Batcher(step, max_batch, mode, window_s, seed)
    arrivals = np.cumsum(b.loop.stream("arrivals").exponential(1.0 / traffic.rate, requests))
    prompts = traffic.input.sample(b.loop.stream("prompt lengths"), requests)
    outputs = traffic.output.sample(b.loop.stream("output lengths"), requests)
    reqs = [_Req(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs, strict=True)]
    for r in reqs:
        b.loop.at(r.arrival, ARRIVAL, b.arrive, r)
    b.loop.run()
    kept = reqs[int(warmup * requests):]
    # (arrival, first token, done, output tokens): the loop runs until every request is done.
    served = [(r.arrival, r.first, r.done, r.output) for r in kept if r.first is not None and r.done is not None]
    if len(served) != len(kept):
        raise RuntimeError(f"the batcher stopped with {len(kept) - len(served)} requests unserved")
    ttft = np.array([first - arrival for arrival, first, _, _ in served])
    tpots = np.array([(done - first) / (out - 1) for _, first, done, out in served if out > 1])
    span = max(done for _, _, done, _ in served) - kept[0].arrival
    tokens = sum(r.output for r in kept)
    busy = b.loop.now
    return SimResult(mode, len(kept), float(np.percentile(ttft, 50)), float(np.percentile(ttft, 99)),
                     float(np.percentile(tpots, 50)) if tpots.size else None,
                     float(np.percentile(tpots, 99)) if tpots.size else None,
                     tokens / span if span > 0 else 0.0, b.batch_time / busy if busy > 0 else 0.0,
                     ttft.tolist())
