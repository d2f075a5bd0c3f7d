"""Read a PLAN file (schema gpucluster-plan-train/v1, the output of `gpucluster plan train --json`)
into the facts a generator needs, after validating all of it (plan_schema.py)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import UserError
from gpucluster.generate.plan_schema import SCHEMA, PlanDoc, check_job_fields, check_strings, validate_plan

__all__ = ["SCHEMA", "JobPlan", "load_plan", "plan_from_dict"]

_FABRIC = re.compile(r"^(?P<gpu>[A-Za-z0-9][A-Za-z0-9._+-]{0,63}) x (?P<per>\d{1,4}) per node")


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
    layers: int | None = None  # transformer layers: from the plan, else the model preset; None: unknown
    model_spec: dict[str, Any] | None = None   # the model's shape (TransformerSpec fields), validated
    steps: float | None = None  # optimizer steps to train (the plan's tokens / batch)

    def __post_init__(self) -> None:
        # Whoever builds a JobPlan (a file, `slurm submit`, a test), its values are checked
        # before any generator can write them.
        check_job_fields({"model": self.model, "gpu": self.gpu, "gpus_per_node": self.gpus_per_node,
                          "nodes": self.nodes, "layout": self.layout, "seq_len": self.seq_len,
                          "scale_out_link": self.scale_out_link, "nic": self.nic, "layers": self.layers},
                         self.source or None)
        check_strings({"description": self.description}, self.source or "<plan>")
        if self.model_spec is not None:
            _check_spec(self.model_spec, self.source or None)
            if self.layers is not None and self.model_spec.get("layers") != self.layers:
                raise UserError(f"{self.model_spec.get('layers')} is not the plan's layers ({self.layers})",
                                file=self.source or None, field="model_spec.layers")

    @property
    def train_iters(self) -> int | None:
        return None if self.steps is None else max(1, math.ceil(self.steps - 1e-9))

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def grad_accum(self) -> int:
        lay = self.layout
        return max(1, lay["global_batch"] // (lay["micro_batch"] * lay["dp"]))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} overflows a float")
    return value


def load_plan(path: str) -> JobPlan:
    from gpucluster.specs.loader import read_text

    text = read_text(path)   # capped in size; refuses missing, unreadable, binary files in one line
    try:
        # NaN, Infinity and 1e999 are not JSON numbers a plan can hold: refused here, not later.
        data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON ({exc.msg})", file=path, line=exc.lineno) from None
    except RecursionError:
        raise UserError("not a plan: nested too deeply", file=path) from None
    except ValueError as exc:   # the hooks above; an integer of more than 4300 digits
        raise UserError(f"not a plan: {str(exc)[:80]}", file=path) from None
    return plan_from_dict(data, path)


def plan_from_dict(data: Any, path: str = "<plan>") -> JobPlan:
    doc: PlanDoc = validate_plan(data, path)
    t = doc.target
    gpu, per = t.gpu, t.gpus_per_node
    if gpu is None or per is None:  # plans written before these fields existed
        m = _FABRIC.match(t.fabric or "")
        if not m:
            raise UserError("missing (and target.fabric does not name the GPU and GPUs per node)", file=path,
                            field="target.gpu")
        gpu, per = m.group("gpu"), int(m.group("per"))
        lay = doc.best.layout
        if not 1 <= per <= 1024 or lay.tp * lay.pp * lay.dp * lay.cp != t.nodes * per:
            raise UserError(f"tp x pp x dp x cp does not match {t.nodes} nodes x {per} GPUs", file=path,
                            field="best.layout")
    layout = doc.best.layout.model_dump()
    return JobPlan(model=doc.model, gpu=gpu, gpus_per_node=per, nodes=t.nodes, layout=layout,
                   seq_len=doc.seq_len, step_s=float(doc.best.step_s), scale_out_link=t.scale_out_link,
                   nic=t.nic, description=t.description, source=path,
                   layers=doc.layers if doc.layers is not None else preset_layers(doc.model),
                   model_spec=doc.model_spec, steps=None if doc.steps is None else float(doc.steps))


def _check_spec(data: dict[str, Any], source: str | None) -> None:
    """The plan's model shape is a valid TransformerSpec whose layer count is the plan's."""
    from pydantic import ValidationError

    from gpucluster.specs.workload import TransformerSpec

    try:
        TransformerSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(["model_spec", *(str(p) for p in err["loc"])])
        raise UserError(err["msg"].removeprefix("Value error, "), file=source, field=where) from None


def preset_layers(model: str) -> int | None:
    """The layer count of a model preset named as the plan names it (its display name or an
    alias); None for a model from a YAML file, which the plan does not describe."""
    try:
        from gpucluster.specs.workload import model_presets

        presets = model_presets()
        return int(presets.get(model).model.layers) if model in presets else None
    except (UserError, KeyError, LookupError):
        return None
