"""The one check of the public API's arguments (types and ranges), applied where each public
function is defined, so `gpucluster.plan_train(...)`, the CLI that calls it and the sweep
workers get the same rules.

A bad argument raises `UserError` naming the option and the range, never a bare `TypeError`,
`ValueError`, `KeyError`, `AttributeError` or pydantic `ValidationError` from deep inside.
The CLI's typer options already hold the types; the ranges live here, once (the per-option
bounds are the spec readers': nodes per pool <= 1,000,000, GPUs per node <= 1,024, sequence
counts and lengths <= 2**31 - 1, which Megatron-LM and DeepSpeed read as C ints).

A leaf module (standard library only): it is imported by every API module at start-up.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gpucluster.errors import UserError

MAX_NODES = 1_000_000          # the cluster spec's nodes per pool
MAX_GPUS_PER_NODE = 1024
MAX_C_INT = 2**31 - 1          # batch sizes and sequence lengths the frameworks read as int32
MAX_SEED = 2**64 - 1           # as a scenario's `seed` (numpy takes non-negative seeds)
MAX_QUOTE = 60                 # characters of a bad value quoted in an error line

F = TypeVar("F", bound=Callable[..., Any])


def shown(value: Any) -> str:
    """A bad value as an error line quotes it: its repr, cut to MAX_QUOTE characters."""
    try:
        text = repr(value)
    except Exception:   # noqa: BLE001  # a hostile __repr__ may raise anything: the type says enough
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE] + f"... ({len(text)} characters)"


class Rule:
    """One argument's rule: `check` returns None when the value passes, else what it must be."""
    optional = False
    what = "a value"

    def check(self, value: Any) -> str | None:  # pragma: no cover - every rule overrides it
        raise NotImplementedError


class Int(Rule):
    def __init__(self, low: int, high: int, *, optional: bool = False) -> None:
        self.low, self.high, self.optional = low, high, optional
        self.what = f"an integer from {low:,} to {high:,}"

    def check(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return self.what
        return None if self.low <= int(value) <= self.high else self.what


class Real(Rule):
    """A finite number in [low, high] (or (low, high] with `above`)."""

    def __init__(self, low: float, high: float, *, above: bool = False, optional: bool = False,
                 unit: str = "") -> None:
        self.low, self.high, self.above, self.optional = low, high, above, optional
        lo = f"> {low:g}" if above else f">= {low:g}"
        self.what = f"a finite number {lo} and <= {high:g}{unit}"

    def check(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return self.what
        try:
            v = float(value)
        except (OverflowError, ValueError):
            return self.what
        ok = math.isfinite(v) and (v > self.low if self.above else v >= self.low) and v <= self.high
        return None if ok else self.what


class Text(Rule):
    def __init__(self, *, optional: bool = False, choices: tuple[str, ...] | None = None,
                 max_len: int = 4096) -> None:
        self.optional, self.choices, self.max_len = optional, choices, max_len
        self.what = f"one of {', '.join(choices)}" if choices else f"text (at most {max_len:,} characters)"

    def check(self, value: Any) -> str | None:
        if not isinstance(value, str) or len(value) > self.max_len or "\x00" in value:
            return self.what
        return None if self.choices is None or value in self.choices else self.what


class PathArg(Rule):
    """A file name: text or an os.PathLike (pathlib.Path), without NUL bytes."""
    what = "a file path (str or pathlib.Path)"

    def __init__(self, *, optional: bool = False) -> None:
        self.optional = optional

    def check(self, value: Any) -> str | None:
        if isinstance(value, os.PathLike):
            try:
                value = os.fspath(value)
            except Exception:   # noqa: BLE001  # a hostile __fspath__
                return self.what
        if not isinstance(value, str) or not value or "\x00" in value or len(value) > 4096:
            return self.what
        return None


class Flag(Rule):
    what = "True or False"

    def __init__(self, *, optional: bool = False) -> None:
        self.optional = optional

    def check(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self.what


class Function(Rule):
    what = "a function (callable)"

    def __init__(self, *, optional: bool = True) -> None:
        self.optional = optional

    def check(self, value: Any) -> str | None:
        return None if callable(value) else self.what


class Instance(Rule):
    """An instance of a class named "module:Class", looked up only in modules already imported
    (a value cannot be an instance of a class whose module was never loaded)."""

    def __init__(self, target: str, what: str) -> None:
        self.target, self.what = target, what

    def check(self, value: Any) -> str | None:
        module, _, name = self.target.partition(":")
        cls = getattr(sys.modules.get(module), name, None)
        return None if cls is not None and isinstance(value, cls) else self.what


class ListOf(Rule):
    """A list or tuple (not a string) of at most `most` items, each passing `item`."""

    def __init__(self, item: Rule, *, optional: bool = False, most: int = 10_000) -> None:
        self.item, self.optional, self.most = item, optional, most
        self.what = f"a list of {item.what}"

    def check(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or len(value) > self.most:
            return self.what
        return next((f"{self.what} (item {i}: {shown(v)})" for i, v in enumerate(value)
                     if self.item.check(v) is not None), None)


class AnyOf(Rule):
    def __init__(self, *rules: Rule, optional: bool = False) -> None:
        self.rules, self.optional = rules, optional
        self.what = " or ".join(r.what for r in rules)

    def check(self, value: Any) -> str | None:
        return None if any(r.check(value) is None for r in self.rules) else self.what


def _problem(rule: Rule, value: Any) -> str | None:
    if value is None:
        return None if rule.optional else rule.what
    return rule.check(value)


def checked(rules: Mapping[str, Rule], *, flags: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """Check a public function's arguments against `rules` (parameter -> Rule) before it runs.
    A call that does not fit the signature (a missing or unknown argument) is a UserError too.
    Errors name the CLI flag of the parameter (`--input` for input_tokens via `flags`, else
    `--name-with-dashes`), as the errors raised further in already do."""
    flags = dict(flags or {})

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        name = func.__name__
        # An argument with no default is positional in the API (and mostly in the CLI): named bare.
        positional = {p.name: p.default is inspect.Parameter.empty for p in signature.parameters.values()}

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                params = ", ".join(signature.parameters)
                raise UserError(f"{exc} (arguments: {params})", field=name) from None
            for param, value in bound.arguments.items():
                rule = rules.get(param)
                if rule is None:
                    continue
                problem = _problem(rule, value)
                if problem is not None:
                    field = flags.get(param, param if positional[param] else "--" + param.replace("_", "-"))
                    raise UserError(f"must be {problem}, got {shown(value)} ({type(value).__name__})",
                                    field=field)
            return func(*args, **kwargs)

        wrapper.__gpucluster_rules__ = rules   # type: ignore[attr-defined]  # tests hold every parameter to a rule
        return wrapper  # type: ignore[return-value]
    return decorate


# The public functions' rules, beside each other so they read as one table.
# A model name of any length reaches the preset lookup, which names the unknown preset (and cuts it).
_MODEL = AnyOf(Text(max_len=1_000_000), PathArg(), Instance("gpucluster.specs.workload:TransformerSpec", "a TransformerSpec"))
_DURATION = AnyOf(Text(max_len=64), Real(0, 10 * 365 * 86400.0, above=True, unit=" s"), optional=True)

PLAN_TRAIN = {
    "model": _MODEL, "cluster": PathArg(optional=True), "pool": Text(optional=True), "gpu": Text(optional=True),
    "nodes": Int(1, MAX_NODES, optional=True), "nic": Text(), "nics_per_node": Int(1, MAX_GPUS_PER_NODE, optional=True),
    "tokens": AnyOf(Int(1, 10**18), Text(max_len=64), optional=True),
    "global_batch": Int(1, MAX_C_INT, optional=True), "seq_len": Int(1, MAX_C_INT, optional=True),
    "layout": AnyOf(Instance("builtins:dict", "a dict of layout keys"), Text(), optional=True),
    "precision": Text(), "top": Int(1, 10_000), "tp_across_domains": Flag(),
    "attention": Text(optional=True), "dp_overlap": Flag(optional=True), "tp_overlap": Flag(optional=True),
    "moe_overlap": Text(optional=True), "framework": Text(optional=True),
    "shard_group": Int(1, MAX_NODES * MAX_GPUS_PER_NODE, optional=True),
    "failure_profile": Text(), "checkpoint_write_gbps": Real(1e-6, 1e6, optional=True, unit=" GB/s"),
    "restart_s": Real(0, 10 * 365 * 86400.0, optional=True, unit=" s"), "checkpoint_interval": _DURATION,
}
MAX_RATE = 1e7   # requests per second: ~100x the largest public serving fleets' peak; past it the search is meaningless
PLAN_SERVE = {
    "model": _MODEL, "rate": AnyOf(Text(max_len=64), Real(0, MAX_RATE, above=True, unit=" requests/s")),
    "gpu": Text(optional=True), "cluster": PathArg(optional=True), "pool": Text(optional=True),
    "nodes": Int(1, MAX_NODES, optional=True), "nic": Text(), "input_tokens": Int(1, MAX_C_INT),
    "output_tokens": Int(1, MAX_C_INT), "lengths": Text(), "slo_ttft": _DURATION, "slo_tpot": _DURATION,
    "precision": Text(), "kv_precision": Text(optional=True), "max_batch": Int(1, 1_000_000),
    "compare": AnyOf(Text(), ListOf(Text()), optional=True), "cpu": Text(optional=True), "simulate": Flag(),
    "engine": Text(optional=True),
}
SERVE_FLAGS = {"input_tokens": "--input", "output_tokens": "--output", "model": "--model", "rate": "--rate"}
TRAIN_FLAGS = {"model": "--model"}
SIMULATE = {
    "scenario": AnyOf(PathArg(), Instance("gpucluster.specs.scenario:Scenario", "a Scenario"),
                      Instance("gpucluster.specs.scenario:LoadedScenario", "a LoadedScenario")),
    "policy": Text(optional=True), "seed": Int(0, MAX_SEED, optional=True), "events": Function(),
    "on_progress": Function(), "on_start": Function(), "policy_field": Text(),
}
MAX_INPUT_GBPS = 1e6   # per GPU: far above any storage fabric (a 400G NIC moves 50 GB/s)
CHECK = {
    "cluster": PathArg(), "jobs": ListOf(PathArg(), optional=True), "model": Text(optional=True), "profile": Text(),
    "pool": Text(optional=True), "interfaces": AnyOf(Text(), ListOf(Text()), optional=True),
    "input_gbps_per_gpu": Real(0, MAX_INPUT_GBPS, optional=True, unit=" GB/s"),
    "checkpoint_interval": _DURATION, "checkpoint_tier": Text(optional=True),
    "rules": ListOf(Text(), optional=True), "fail_on": Text(),
}
ONE_PATH = {"path": PathArg()}
MODEL_NAME = {"name_or_path": AnyOf(Text(max_len=1_000_000), PathArg())}
DOCUMENT_NAME = {"name": Text(max_len=200)}


MAX_WAIT_S = 30 * 86400.0       # following a job: a month
MAX_COMMAND_S = 86400.0          # one Slurm command, one benchmark run, one poll interval


def seconds_option(value: Any, flag: str, *, high: float = MAX_COMMAND_S) -> float:
    """A time option (--timeout, --poll, --wait): a finite number of seconds in (0, high].
    nan, inf, -1 or 1e9 is one line here, never an OverflowError in time.sleep or a follow
    that never ends."""
    rule = Real(0, high, above=True, unit=" s")
    if value is None or rule.check(value) is not None:
        raise UserError(f"must be seconds > 0 and <= {high:g}, got {shown(value)}", field=flag)
    return float(value)


def count_option(value: Any, flag: str, low: int, high: int) -> int:
    """A count option (--iters, --nodes, --local) in [low, high]."""
    rule = Int(low, high)
    if value is None or rule.check(value) is not None:
        raise UserError(f"must be {rule.what}, got {shown(value)}", field=flag)
    return int(value)
