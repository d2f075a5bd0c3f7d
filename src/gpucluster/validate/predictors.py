"""One predictor per case kind, in a registry; a kind without one is reported, not fatal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError

from gpucluster.catalog import catalog
from gpucluster.errors import UserError
from gpucluster.model.collectives import OPS, predict
from gpucluster.model.placement import SCALE_OUT_LINK, nic_gbps_per_gpu
from gpucluster.model.training.fabric import TrainingFabric
from gpucluster.registry import Registry
from gpucluster.specs.loader import format_loc
from gpucluster.specs.validation_case import Case, Collective, Hardware


class Unsupported(Exception):
    """The model cannot predict this case (yet); the message says why."""


class Invalid(Unsupported):
    """A section of the case breaks its own schema (gpus: 0): bad input, not a gap of the model."""


Predictor = Callable[[Case], dict[str, float]]
predictors: Registry[Predictor] = Registry("validation case kind")


def section(model: type[BaseModel], data: Any, name: str) -> Any:
    if data is None:
        raise Unsupported(f"missing `{name}` section")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise Invalid(f"{name}.{format_loc(err['loc'])}: {err['msg']}") from None


def fabric_for(hw: Hardware) -> TrainingFabric:
    """The fabric a validation case's `hardware:` section describes."""
    name = hw.gpu if hw.power_cap_w is None else f"{hw.gpu}@{hw.power_cap_w:g}W"
    try:
        gpu = catalog.gpus.get(name)
    except UserError as exc:
        raise Unsupported(f"hardware.{'gpu' if hw.power_cap_w is None else 'power_cap_w'}: {exc.reason}") from None
    link = gbps = None
    if hw.scale_out is not None:
        link = SCALE_OUT_LINK[hw.scale_out.type]
        gbps = nic_gbps_per_gpu(hw.scale_out.gbps_per_nic, hw.scale_out.nics_per_node, hw.gpus_per_node)
    elif hw.gpus > hw.domain:
        raise Unsupported(f"{hw.gpus} GPUs span several NVLink domains of {hw.domain} but hardware.scale_out "
                          "is not given")
    return TrainingFabric(gpu.name, hw.gpus_per_node, hw.domain, link, gbps)


@predictors.register("collective")
def predict_collective(case: Case) -> dict[str, float]:
    hw: Hardware = section(Hardware, case.hardware, "hardware")
    coll: Collective = section(Collective, getattr(case, "collective", None), "collective")
    if coll.op not in OPS:
        raise Unsupported(f"collective.op {coll.op!r} is not modelled (modelled: {', '.join(OPS)})")
    fab = fabric_for(hw)
    per_node = coll.gpus_per_node or hw.gpus_per_node
    if per_node != hw.gpus_per_node:
        fab = replace(fab, gpus_per_node=per_node, domain=hw.scale_up_domain or per_node)
    if coll.gpus > fab.domain and fab.scale_out_link is None:
        raise Unsupported("the group spans several NVLink domains but hardware.scale_out is not given")
    try:
        group = fab.group(coll.gpus, 1)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    p = predict(coll.op, float(coll.bytes), group)
    return {"busbw_gbps": float(p.busbw_gbps), "algbw_gbps": float(p.algbw_gbps), "time_us": float(p.time_s) * 1e6}
