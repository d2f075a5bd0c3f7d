"""The queueing model's TTFT against the discrete-event batcher (model/serving/batcher_sim.py) on
the grid plan serve meets: Llama 3 8B (TP1) and 70B (TP4) on H100, bf16, five traffic shapes
(fixed, uniform and exponential lengths; 512 to 4,096-token prompts) at 30%, 60% and 85% of the
replica's saturated rate; 2,000 Poisson requests per run, seed 0.

Both use the same step times, so this checks the queueing formulas, not the physics. Printed:
each point's TTFT p50 and p99 and TPOT p99 (model / simulated) and the ratios, then the median
|log ratio| and the worst ratio. Target: TTFT and TPOT p99 within 15% (median) of the simulation;
the worst points are the ones the model does not describe and why `plan serve --simulate` exists.

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
    p50s, p99s, tpots, tpot50s = [], [], [], []
    print(f"{'model':11} {'in':>5} {'out':>4} {'lengths':12} {'load':>5} {'TTFT p50 model/sim':>19} "
          f"{'TTFT p99 model/sim':>19} {'ratio':>6} {'TPOT p99 model/sim':>19} {'ratio':>6}  (ms)")
    for name, tp in MODELS:
        step = StepModel(Replica(load_model_spec(name), fab, tp, 1, Quant("bf16", "bf16")))
        for s_in, s_out, dist in SHAPES:
            top = saturated(step, Traffic(1.0, Lengths(s_in, dist), Lengths(s_out, dist)), MAX_BATCH).rate
            for load in LOADS:
                traffic = Traffic(top * load, Lengths(s_in, dist), Lengths(s_out, dist))
                m = analyze(step, traffic, MAX_BATCH)
                if not m.stable or m.tpot_p99 is None:
                    continue
                sim = simulate(step, traffic, MAX_BATCH, requests=2000)
                assert sim.tpot_p99 is not None    # every shape has more than one output token
                p50s.append(m.ttft_p50 / sim.ttft_p50)
                p99s.append(m.ttft_p99 / sim.ttft_p99)
                tpots.append(m.tpot_p99 / sim.tpot_p99)
                tpot50s.append((m.tpot_p50 or 0.0) / (sim.tpot_p50 or 1.0))
                print(f"{name:11} {s_in:5} {s_out:4} {dist:12} {load:5.2f} {1e3 * m.ttft_p50:9.0f}/{1e3 * sim.ttft_p50:<9.0f} "
                      f"{1e3 * m.ttft_p99:9.0f}/{1e3 * sim.ttft_p99:<9.0f} {p99s[-1]:6.2f} "
                      f"{1e3 * m.tpot_p99:9.1f}/{1e3 * sim.tpot_p99:<9.1f} {tpots[-1]:6.2f}")
    med = lambda xs: math.exp(statistics.median(abs(math.log(x)) for x in xs))  # noqa: E731
    worst = lambda xs: max(xs, key=lambda x: abs(math.log(x)))  # noqa: E731
    print(f"\n{len(p99s)} points: TTFT p50 within x{med(p50s):.3f} (median), p99 within x{med(p99s):.3f} "
          f"(median; target <= x1.15), worst p99 ratio {worst(p99s):.2f}; TPOT p50 within x{med(tpot50s):.3f} "
          f"(median), worst ratio {worst(tpot50s):.2f}; TPOT p99 within x{med(tpots):.3f} (median; target <= x1.15), "
          f"worst ratio {worst(tpots):.2f}")
    return 0 if med(p99s) <= 1.15 and med(tpots) <= 1.15 else 1


if __name__ == "__main__":
    sys.exit(main())
