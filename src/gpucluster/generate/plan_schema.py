"""The plan document (`gpucluster plan train --json`, schema gpucluster-plan-train/v1) as the
generators accept it: a pydantic model that every plan file passes before a single character of
a job file is written.

Why so strict: the generators write the plan's values into shell scripts (comments, `#SBATCH`
lines, torchrun words), YAML and JSON. A GPU name holding a newline became a shell command in
the generated sbatch script (issue 13). So every name is limited to a character set that needs
no quoting anywhere, every number is a real bounded integer (no bools, floats, strings or
huge values), and no string anywhere in the document holds a control character.

The document itself is modelled once, in gpucluster/documents/plan_train.py (what `plan train
--json` prints, and its JSON Schema); the models here are the generators' stricter view of the
fields they write, under the same names (tests/documents/test_plan_train_reader.py holds them
to it), and they accept plans written before some fields existed."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      ValidationError, model_validator)

from gpucluster.documents.plan_train import SCHEMA  # one name for the version
from gpucluster.errors import UserError

MAX_DIM = 1_000_000           # nodes, tp, pp, dp, cp, ep, interleave: far above any real cluster
MAX_BIG = 2**31 - 1           # sequence counts and lengths: Megatron/DeepSpeed read them as C ints
MAX_GPUS_PER_NODE = 1024
MAX_EXTRA_STRING = 32         # unknown layout keys: short tokens only
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _pattern(regex: str, max_len: int, allowed: str):
    """A validator for a name: `max_len` characters from `allowed` (described in words)."""
    rx = re.compile(regex)

    def check(value: str) -> str:
        if not value or len(value) > max_len or not rx.fullmatch(value):
            raise ValueError(f"must be 1-{max_len} characters of {allowed}, starting with a letter or digit; "
                             f"got {_short(value)}")
        return value
    return AfterValidator(check)


# Characters that are plain in a shell word, a `#SBATCH` value, a comment, YAML and JSON alike.
GpuName = Annotated[StrictStr, _pattern(r"[A-Za-z0-9][A-Za-z0-9._+-]*", 64, "A-Z a-z 0-9 . _ + -")]
LinkName = Annotated[StrictStr, _pattern(r"[A-Za-z0-9][A-Za-z0-9._+-]*", 64, "A-Z a-z 0-9 . _ + -")]
# NIC descriptions read "8 x HDR200"; model names "Llama-2-13B" or "DeepSeek-V3 (671B)".
NicName = Annotated[StrictStr, _pattern(r"[A-Za-z0-9][A-Za-z0-9 ._+-]*", 128, "A-Z a-z 0-9 space . _ + -")]
ModelName = Annotated[StrictStr, _pattern(r"[A-Za-z0-9][A-Za-z0-9 ._+(),/:-]*", 128,
                                          "A-Z a-z 0-9 space . _ + ( ) , / : -")]
Count = Annotated[StrictInt, Field(ge=1, le=MAX_DIM)]
Big = Annotated[StrictInt, Field(ge=1, le=MAX_BIG)]
FreeText = Annotated[StrictStr, Field(max_length=1024)]   # read, never written into a job file
_EXTRA_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_EXTRA_VALUE = re.compile(r"[A-Za-z0-9._-]*")


class PlanLayout(BaseModel):
    """best.layout: the known keys typed; unknown keys (a newer planner's stack options) may
    only be booleans, bounded finite numbers or short plain tokens, so that nothing else can
    ride in. The generators write no unknown key; they are accepted so that an older
    gpucluster reads a newer plan."""
    model_config = ConfigDict(extra="allow", strict=True)

    tp: Count
    pp: Count
    dp: Count
    cp: Count = 1
    ep: Count = 1
    interleave: Count = 1
    micro_batch: Big
    global_batch: Big
    sequence_parallel: StrictBool = False
    recompute: Literal["none", "selective", "full"] = "none"
    zero: Annotated[StrictInt, Field(ge=0, le=3)] = 0
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    offload_optimizer: StrictBool = False
    flash_attention: StrictBool = True
    overlap_dp_comm: StrictBool = True      # the planner's default: gradient reduction overlaps compute
    overlap_tp_comm: StrictBool = False
    moe_overlap: Literal["none", "dualpipe"] = "none"
    moe_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    moe_fp8_dispatch: StrictBool = False
    moe_imbalance: Annotated[StrictFloat | StrictInt, Field(ge=1, le=64)] | None = None  # a model input, nothing to set
    pp_embedding_layer: StrictBool = False
    pp_loss_layer: StrictBool = False
    zero3_prefetch_params: Annotated[StrictFloat | StrictInt, Field(gt=0, le=1e13)] | None = None
    framework: Literal["megatron", "nemo", "deepspeed", "fsdp", "torchtitan", "nanotron", "deepseek"] = "megatron"
    attention_kernel: Annotated[str, Field(pattern=r"^[a-z0-9_]{1,32}$")] = "default"   # attention.py names
    shard_group: Annotated[StrictInt, Field(ge=0, le=MAX_BIG)] = 0          # HSDP shard group; 0: all of dp x cp
    torch_compile: StrictBool | None = None
    fused_kernels: StrictBool | None = None
    stage_layers: list[Annotated[StrictInt, Field(ge=0, le=100_000)]] = Field(default_factory=list, max_length=4096)

    @model_validator(mode="after")
    def _extras(self) -> PlanLayout:
        for key, value in (self.model_extra or {}).items():
            if not _EXTRA_KEY.fullmatch(key):
                raise ValueError(f"unknown key {_short(key)}: keys are 1-32 characters of a-z 0-9 _")
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and -MAX_BIG <= value <= MAX_BIG:
                continue
            if isinstance(value, float) and math.isfinite(value) and abs(value) <= MAX_BIG:
                continue   # written as repr(): digits, '.', 'e', '-' only
            if isinstance(value, str) and len(value) <= MAX_EXTRA_STRING and _EXTRA_VALUE.fullmatch(value):
                continue
            raise ValueError(f"{key}: an unknown layout key may hold a boolean, a finite number up to {MAX_BIG} or "
                             f"up to {MAX_EXTRA_STRING} characters of A-Z a-z 0-9 . _ -; got {_short(value)}")
        return self


class PlanTarget(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    nodes: Count
    gpus: Count | None = None
    gpu: GpuName | None = None
    gpus_per_node: Annotated[StrictInt, Field(ge=1, le=MAX_GPUS_PER_NODE)] | None = None
    fabric: FreeText | None = None      # plans written before `gpu`/`gpus_per_node` existed
    nic: NicName | None = None
    scale_out_link: LinkName | None = None
    description: FreeText = ""


def _finite(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a finite number >= 0, got {value!r}")
    return value


MAX_STEP_S = 365 * 86400    # a year per step: 1e308 passed _finite, then the job chain's wall time overflowed


def _step(value: float) -> float:
    _finite(value)
    if value > MAX_STEP_S:
        raise ValueError(f"must be at most {MAX_STEP_S:,} s (a year per step), got {value!r}")
    return value


class PlanBest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    layout: PlanLayout
    step_s: Annotated[StrictFloat | StrictInt, AfterValidator(_step)]


class PlanDoc(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)

    schema_: Literal["gpucluster-plan-train/v1"] = Field(alias="schema")
    model: ModelName
    seq_len: Big
    target: PlanTarget
    best: PlanBest
    layers: Count | None = None    # a plan may carry the model's layer count (the generators need it for pp)
    # The model's shape (checked as a TransformerSpec by plan_file) and the run's length: the
    # generators write them as framework arguments (model shape, --train-iters, checkpoints).
    model_spec: dict[str, Any] | None = None
    steps: Annotated[StrictFloat | StrictInt, AfterValidator(_finite), Field(le=MAX_BIG)] | None = None


class JobFields(BaseModel):
    """The facts a generator writes (generate/plan_file.JobPlan), checked again whenever a
    JobPlan is built, from a file or in code (`gpucluster slurm submit`, tests): no path to a
    job file skips the check."""
    model_config = ConfigDict(extra="forbid", strict=True)

    model: ModelName
    gpu: GpuName
    gpus_per_node: Annotated[StrictInt, Field(ge=1, le=MAX_GPUS_PER_NODE)]
    nodes: Count
    layout: PlanLayout
    seq_len: Big
    scale_out_link: LinkName | None = None
    nic: NicName | None = None
    layers: Count | None = None


def check_job_fields(fields: dict[str, Any], source: str | None) -> None:
    check_strings(fields, source or "<plan>")
    try:
        JobFields.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        where = where.replace("layout", "best.layout", 1) if where.startswith("layout") else where
        raise UserError(err["msg"].removeprefix("Value error, "), file=source, field=where or None) from None


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_strings(data: Any, path: str) -> None:
    """No control character (newline, escape, NUL...) in any key or string of the document,
    read or not: walked without recursion, so a deeply nested file cannot blow the stack."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                sub = f"{where}.{key}" if where else str(key)
                if _CONTROL.search(key):
                    raise UserError(f"a key holds a control character: {_short(key)}", file=path,
                                    field=where or None)
                stack.append((value, sub))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, str) and _CONTROL.search(node):
            raise UserError(f"must not contain newlines or control characters: {_short(node)}", file=path,
                            field=where)


def validate_plan(data: Any, path: str) -> PlanDoc:
    """The document as a PlanDoc, or one UserError: `FILE: field: reason`."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UserError(f"expected a training plan (schema {SCHEMA}, from `gpucluster plan train --json`), "
                        f"got {_short(got)}", file=path)
    check_strings(data, path)
    try:
        doc = PlanDoc.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        reason = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            reason = "missing"
        raise UserError(reason, file=path, field=field) from None
    _check_consistent(doc, path)
    return doc


def _check_consistent(doc: PlanDoc, path: str) -> None:
    """What each value allows alone is checked above; here, what they must agree on for the
    generated job to run the plan (the batch identity, the GPU count)."""
    lay, t = doc.best.layout, doc.target

    def bad(field: str, reason: str) -> UserError:
        return UserError(reason, file=path, field=field)

    if t.gpus is not None and t.gpus_per_node is not None and t.gpus != t.nodes * t.gpus_per_node:
        raise bad("target.gpus", f"{t.gpus} is not nodes x gpus_per_node ({t.nodes} x {t.gpus_per_node})")
    if t.gpus_per_node is not None:
        gpus = t.nodes * t.gpus_per_node
        if lay.tp * lay.pp * lay.dp * lay.cp != gpus:
            raise bad("best.layout", f"tp x pp x dp x cp = {lay.tp} x {lay.pp} x {lay.dp} x {lay.cp} = "
                                     f"{lay.tp * lay.pp * lay.dp * lay.cp}, but the target has {gpus} GPUs")
    if lay.global_batch % (lay.micro_batch * lay.dp):
        raise bad("best.layout.global_batch", f"{lay.global_batch} is not a multiple of micro_batch x dp "
                                              f"({lay.micro_batch} x {lay.dp})")
    if lay.interleave > 1 and lay.pp == 1:
        raise bad("best.layout.interleave", "interleave > 1 needs pp > 1")
    if (lay.dp * lay.cp) % lay.ep:
        raise bad("best.layout.ep", f"{lay.ep} must divide dp x cp ({lay.dp * lay.cp}): expert groups come "
                                    "from data-parallel ranks")
    if lay.sequence_parallel and lay.tp == 1:
        raise bad("best.layout.sequence_parallel", "needs tp > 1")
    if doc.seq_len % lay.cp:
        raise bad("best.layout.cp", f"seq_len ({doc.seq_len}) is not a multiple of cp ({lay.cp})")
    if doc.layers is not None and lay.pp > doc.layers:
        raise bad("best.layout.pp", f"{lay.pp} exceeds the model's layers ({doc.layers})")
