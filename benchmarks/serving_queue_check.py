"""The queueing model's TTFT against the discrete-event batcher (model/serving/batcher_sim.py) on
the grid plan serve meets: Llama 3 8B (TP1) and 70B (TP4) on H100, bf16, five traffic shapes
(fixed, uniform and exponential lengths; 512 to 4,096-token prompts) at 30%, 60% and 85% of the
replica's saturated rate; 2,000 Poisson requests per run, seed 0.

Both use the same step times, so this checks the queueing formulas, not the physics. Printed:
each point's p50 and p99 (model / simulated) and the ratio, then the median |log ratio| and the
worst ratio. Target: p99 within 15% (median) of the simulation; the worst points are the ones the
model does not describe (the prefill queue past the token budget, length-biased variable prompts)
and why `plan serve --simulate` exists.

    python benchmarks/serving_queue_check.py
"""

from __future__ import annotations

import math
import statistics
import sys

from gpucluster.model.serving.batcher_sim import simulate
from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.queueing import Dist, Lengths, StepModel, Traffic, analyze, saturated
from gpucluster.model.serving.step_time import Replica
from gpucluster.plan.fabric_from import from_flags
from gpucluster.specs.workload import load_model_spec

MODELS = (("llama3-8b", 1), ("llama3-70b", 4))
SHAPES: tuple[tuple[int, int, Dist], ...] = (
    (512, 256, "fixed"), (2048, 256, "fixed"), (1024, 512, "uniform"), (512, 128, "exponential"),
    (4096, 128, "fixed"))
LOADS = (0.3, 0.6, 0.85)
MAX_BATCH = 256


def main() -> int:
    fab = from_flags("H100:8", 1, "NDR400", None).fabric
    p50s, p99s = [], []
    print(f"{'model':11} {'in':>5} {'out':>4} {'lengths':12} {'load':>5} {'p50 model/sim ms':>17} "
          f"{'p99 model/sim ms':>17} {'p99 ratio':>9}")
    for name, tp in MODELS:
        step = StepModel(Replica(load_model_spec(name), fab, tp, 1, Quant("bf16", "bf16")))
        for s_in, s_out, dist in SHAPES:
            top = saturated(step, Traffic(1.0, Lengths(s_in, dist), Lengths(s_out, dist)), MAX_BATCH).rate
            for load in LOADS:
                traffic = Traffic(top * load, Lengths(s_in, dist), Lengths(s_out, dist))
                m = analyze(step, traffic, MAX_BATCH)
                if not m.stable:
                    continue
                sim = simulate(step, traffic, MAX_BATCH, requests=2000)
                p50s.append(m.ttft_p50 / sim.ttft_p50)
                p99s.append(m.ttft_p99 / sim.ttft_p99)
                print(f"{name:11} {s_in:5} {s_out:4} {dist:12} {load:5.2f} {1e3 * m.ttft_p50:8.0f}/{1e3 * sim.ttft_p50:<8.0f} "
                      f"{1e3 * m.ttft_p99:8.0f}/{1e3 * sim.ttft_p99:<8.0f} {p99s[-1]:9.2f}")
    med = lambda xs: math.exp(statistics.median(abs(math.log(x)) for x in xs))  # noqa: E731
    worst = max(p99s, key=lambda x: abs(math.log(x)))
    print(f"\n{len(p99s)} points: TTFT p50 within x{med(p50s):.3f} (median), p99 within x{med(p99s):.3f} "
          f"(median; target <= x1.15), worst p99 ratio {worst:.2f}")
    return 0 if med(p99s) <= 1.15 else 1


if __name__ == "__main__":
    sys.exit(main())
