"""How well the attention-kernel model reproduces the public microbenchmark rows, in-sample and leave-one-chip-out.

    python benchmarks/attention_fit.py [--json]

In-sample: every chip's own forward rows (bf16/fp16, shape stated) against the fitted curve of that chip and
kernel (model/training/attention.py). Leave-one-chip-out: the chip's rows of that kernel are removed from the
catalog, the chip borrows as a chip without them would (same architecture first, else the median measured
chip, as a fraction of bf16 peak), and its rows are predicted. Per chip and kernel: rows, median |error|,
max |error|. Figures are recorded in docs/catalog.md.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from gpucluster.catalog import catalog
from gpucluster.model.training import attention


def _rows(gpu: str, measured_as: str):
    return [p for p in catalog.gpus.get(gpu).efficiency.attention
            if p.kernel == measured_as and p.direction == "forward" and p.precision in ("bf16", "fp16")
            and p.seq_len and p.head_dim]


def _errors(gpu: str, kernel: str, rows) -> list[float]:
    rate = attention.kernel_rate(gpu, kernel)
    return [rate.forward_tflops(p.seq_len, p.head_dim, bool(p.causal)) / p.tflops - 1 for p in rows]


def _without(gpu: str, measured_as: str):
    """The catalog's GPU registry with this chip's rows of one kernel removed (restored by the caller)."""
    entry = catalog.gpus.get(gpu)
    rows = [p for p in entry.efficiency.attention if p.kernel != measured_as]
    eff = entry.efficiency.model_copy(update={"attention": rows})
    return entry.model_copy(update={"efficiency": eff})


def main(argv: list[str]) -> int:
    out: list[dict[str, Any]] = []
    for name in catalog.gpus.names():
        for k in attention.KERNELS.values():
            rows = _rows(name, k.measured_as) if k.measured_as else []
            if not rows:
                continue
            attention.clear()
            own = _errors(name, k.name, rows)
            saved = catalog.gpus._entries[name]
            catalog.gpus._entries[name] = _without(name, k.measured_as)
            attention.clear()
            try:
                held = _errors(name, k.name, rows)
                borrowed = attention.kernel_rate(name, k.name).provenance.split(";")[0]
            finally:
                catalog.gpus._entries[name] = saved
                attention.clear()
            out.append({"gpu": name, "kernel": k.name, "rows": len(rows),
                        "in_sample_median": statistics.median(abs(e) for e in own),
                        "in_sample_max": max(abs(e) for e in own),
                        "held_out_median": statistics.median(abs(e) for e in held),
                        "held_out_signed": statistics.mean(held), "held_out_as": borrowed})
    if "--json" in argv:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{'chip':<18}{'kernel':<9}{'rows':>5}{'in-sample med':>15}{'max':>7}{'held-out med':>14}{'signed':>8}  "
          "held out, the chip borrows")
    for r in out:
        print(f"{r['gpu']:<18}{r['kernel']:<9}{r['rows']:>5}{100 * r['in_sample_median']:>14.1f}%"
              f"{100 * r['in_sample_max']:>6.1f}%{100 * r['held_out_median']:>13.1f}%{100 * r['held_out_signed']:>+7.1f}%"
              f"  {r['held_out_as']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
