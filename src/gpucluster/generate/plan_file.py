"""Read a PLAN file (schema gpucluster-plan-train/v1, the output of `gpucluster plan train --json`)
into the facts a generator needs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import UserError

SCHEMA = "gpucluster-plan-train/v1"
_FABRIC = re.compile(r"^(?P<gpu>\S+) x (?P<per>\d+) per node")


@dataclass(frozen=True)
class JobPlan:
    """A training job as a plan lays it out."""
    model: str
    gpu: str                   # catalog name, e.g. H100-SXM5-80GB
    gpus_per_node: int
    nodes: int
    layout: dict[str, Any]     # tp, pp, dp, cp, ep, interleave, micro_batch, global_batch, zero, precision...
    seq_len: int
    step_s: float
    scale_out_link: str | None = None   # InfiniBand, RoCE, Ethernet or None (one node)
    nic: str | None = None
    description: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def grad_accum(self) -> int:
        lay = self.layout
        return max(1, lay["global_batch"] // (lay["micro_batch"] * lay["dp"]))


def load_plan(path: str) -> JobPlan:
    from gpucluster.specs.loader import read_text

    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON ({exc.msg})", file=path, line=exc.lineno) from None
    return plan_from_dict(data, path)


def plan_from_dict(data: Any, path: str = "<plan>") -> JobPlan:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UserError(f"expected a training plan (schema {SCHEMA}, from `gpucluster plan train --json`), "
                        f"got {got!r}", file=path)
    try:
        target, best = data["target"], data["best"]
        layout = dict(best["layout"])
        gpu, per = target.get("gpu"), target.get("gpus_per_node")
        if gpu is None or per is None:  # plans written before these fields existed
            m = _FABRIC.match(target.get("fabric", ""))
            if not m:
                raise KeyError("target.gpu")
            gpu, per = m.group("gpu"), int(m.group("per"))
        for key in ("tp", "pp", "dp", "micro_batch", "global_batch"):
            if not isinstance(layout.get(key), int) or layout[key] < 1:
                raise UserError(f"must be a positive integer, got {layout.get(key)!r}", file=path,
                                field=f"best.layout.{key}")
        return JobPlan(model=str(data["model"]), gpu=str(gpu), gpus_per_node=int(per), nodes=int(target["nodes"]),
                       layout=layout, seq_len=int(data["seq_len"]), step_s=float(best["step_s"]),
                       scale_out_link=target.get("scale_out_link"), nic=target.get("nic"),
                       description=str(target.get("description", "")), source=path)
    except KeyError as exc:
        raise UserError(f"missing {exc.args[0]!r}", file=path) from None
