"""The top layouts of a few training searches, as the golden file tests/plan/data/search_top10.json
holds them (computed before the search reused its memory terms; regenerate only on purpose:
`python tests/plan/search_golden.py > tests/plan/data/search_top10.json`)."""

from __future__ import annotations

import json
import sys

from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.plan.train_search import search
from gpucluster.specs.workload import load_model_spec

CASES = {
    "llama3.1-405b on 16384 H100": ("llama3.1-405b", ("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0), 16384, 2048, {}),
    "llama3-70b on 256 H200": ("llama3-70b", ("H200-SXM-141GB", 8, 8, "InfiniBand", 50.0), 256, 512, {}),
    "mixtral-8x7b on 64 H100, 100G": ("mixtral-8x7b", ("H100-SXM5-80GB", 8, 8, "Ethernet", 12.5), 64, 256, {}),
    "deepseek-v3 on 2048 H100": ("deepseek-v3", ("H100-SXM5-80GB", 8, 8, "InfiniBand", 50.0), 2048, 1024, {}),
    "llama2-13b on 32 A100, fixed tp=2": ("llama2-13b", ("A100-SXM4-80GB", 8, 8, "InfiniBand", 25.0), 32, 128,
                                          {"tp": 2}),
}


def run() -> dict[str, list[dict]]:
    out = {}
    for name, (model, fab, gpus, gbs, fixed) in CASES.items():
        res = search(load_model_spec(model), TrainingFabric(*fab), gpus, gbs, fixed=fixed, top=10)
        out[name] = [{"layout": e.layout.short(), "step_s": e.step_s, "memory": e.memory.total}
                     for e in res.ranked]
        out[name].append({"considered": res.considered, "estimated": res.estimated, "equivalent": res.equivalent,
                          "rejected": dict(sorted(res.rejected.items()))})
    return out


if __name__ == "__main__":
    json.dump(run(), sys.stdout, indent=1)
    print()
