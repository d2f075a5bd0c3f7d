"""Fuzz cases: the real examples (cluster specs, scenarios, traces, job files, model and price
files) mutated with wrong types, huge/negative/NaN/inf numbers, deep nesting, aliases, binary
bytes, empty files and hostile strings in names; each with a `gpucluster` command line to run.

Shared by the in-process hypothesis tests (tests/fuzz/test_fuzz_cli.py, choices drawn by
hypothesis so that failures shrink) and the long run (benchmarks/fuzz_long.py, choices from a
seeded random.Random, each case in its own process under resource limits). `classify` is the
oracle both use: what a run of a case may and may not print.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"
T = TypeVar("T")


class Source(Protocol):
    """Where choices come from: hypothesis (shrinkable) or random.Random (the long run)."""

    def pick(self, options: Sequence[T]) -> T: ...

    def integer(self, lo: int, hi: int) -> int: ...


class RandomSource:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DataSource:
    """hypothesis's `data` object behind the Source protocol."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def pick(self, options: Sequence[T]) -> T:
        return options[self.data.draw(self.st.integers(0, len(options) - 1))]

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# Sentinels: if the output ever holds the left side joined without its brackets, rich ate markup.
MARKUP_PROBES = {"Q1[bold]Q2": "Q1Q2", "Q3[/x]Q4": "Q3Q4", "Q5[estimate]Q6": "Q5Q6",
                 "[link=file:///etc/passwd]Q7[/link]Q8": "Q7Q8", "Q9[/]Q0": "Q9Q0"}
HOSTILE_STRINGS: list[str] = [
    *MARKUP_PROBES, "lab [/x]", "lab cluster [estimate]", "pool[a]", "a\\", "[", "]", "[/]", "[bold",
    "\x1b]0;TITLE\x07", "\x1b[2J\x1b[Hcleared", "x\x1b[31mred", "bell\x07", "\x9b31m", "\u202eevil.txt",
    "tab\there", "new\nline", "cr\rreturn", "nul\x00byte", "", " ", "é☃𝔘", "a" * 5000, "-1", "nan", "1e999",  # noqa: RUF001  (hostile on purpose)
    "${HOME}", "$(id)", "'; rm -rf /", "%s%n", "{0}", "<script>x</script>", "H100:8", "null", "~",
]
HOSTILE_NUMBERS: list[Any] = [0, -1, -8, 1, 2**31, 2**63, 10**30, 1e308, -1e308, math.inf, -math.inf, math.nan,
                              1e-300, 0.5, -0.0, True, False, None]
WRONG_TYPES: list[Any] = ["8", "abc", [], {}, [1, 2], {"a": 1}, [[[[[]]]]], "1" * 4400]


@dataclass
class Case:
    """One run: files to write (name -> bytes) and argv, in which `{dir}` is the case's folder."""
    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    note: str = ""
    refuse: bool = False          # the case holds a value known to be invalid: exit 0 is a wrong accept
    fifos: list[str] = field(default_factory=list)       # named pipes to make (no writer ever opens them)

    def args(self, folder: Path) -> list[str]:
        return [a.replace("{dir}", str(folder)) for a in self.argv]

    def write(self, folder: Path) -> None:
        for name, data in self.files.items():
            path = folder / name                  # "in[/x].yaml" is the file x].yaml in a folder in[
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for name in self.fifos:
            os.mkfifo(folder / name)


# --- structured mutations ---------------------------------------------------------------------

def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into the document, containers and leaves."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths(v, (*prefix, i))
    return out


def set_at(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return data


@dataclass
class Mutation:
    """What the last mutate_data call did: the oracle's wrong-accept rules read it."""
    op: str = ""
    where: tuple = ()
    value: Any = None


LAST = Mutation()


def mutate_data(src: Source, data: Any, name_keys: Sequence[tuple] = (),
                focus: Sequence[tuple] = ()) -> tuple[Any, str]:
    """One structural change: a hostile value at a random place, a name made hostile, a key
    removed or added, a subtree nested deep or repeated. `focus`: paths worth hitting more often
    (the fields a reader uses), picked half the time when they exist. LAST records the change."""
    data = copy.deepcopy(data)
    data, note = _mutate(src, data, name_keys, focus)
    return data, note


COIN = (True, False)    # a fair coin for Source.pick


def _mutate(src: Source, data: Any, name_keys: Sequence[tuple], focus: Sequence[tuple]) -> tuple[Any, str]:
    op = src.pick(["number", "string", "type", "name", "name", "delete", "unknown", "nest", "repeat"])
    all_paths = paths(data)
    present = [f for f in focus if f in all_paths]
    where = src.pick(present) if present and bool(src.pick(COIN)) else src.pick(all_paths)
    LAST.op, LAST.where, LAST.value = op, where, None
    if op == "name" and name_keys:
        path = src.pick(list(name_keys))
        try:
            value = src.pick(HOSTILE_STRINGS)
            LAST.op, LAST.where, LAST.value = "string", path, value
            return set_at(data, path, value), f"name {path}"
        except (KeyError, IndexError, TypeError):
            op = "string"
    mutated = _mutation_value(src, op, where, data)
    return mutated
    if op == "name" and name_keys:
        path = src.pick(list(name_keys))
        try:
            return set_at(data, path, src.pick(HOSTILE_STRINGS)), f"name {path}"
        except (KeyError, IndexError, TypeError):
            op = "string"


def _set(data: Any, where: tuple, op: str, value: Any) -> Any:
    LAST.op, LAST.where, LAST.value = op, where, value
    return set_at(data, where, value)


def _mutation_value(src: Source, op: str, where: tuple, data: Any) -> tuple[Any, str]:
    if op in ("number", "name"):
        return _set(data, where, "number", src.pick(HOSTILE_NUMBERS)), f"number at {where}"
    if op == "string":
        return _set(data, where, "string", src.pick(HOSTILE_STRINGS)), f"string at {where}"
    if op == "type":
        return _set(data, where, "type", src.pick(WRONG_TYPES)), f"type at {where}"
    if op == "delete" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        del parent[where[-1]]
        LAST.op, LAST.where = "delete", where
        return data, f"delete {where}"
    if op == "unknown":
        target = data
        for p in where:
            target = target[p]
        if isinstance(target, dict):
            target[src.pick(HOSTILE_STRINGS[:12] + ["colour"])] = src.pick(HOSTILE_NUMBERS)
            LAST.op = "unknown"
            return data, f"unknown key at {where}"
    if op == "nest":
        value: Any = 1
        for _ in range(src.integer(10, 200)):
            value = [value]
        return _set(data, where, "nest", value), f"nested at {where}"
    if op == "repeat" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        if isinstance(parent, list):
            parent.extend([parent[where[-1]]] * src.integer(2, 300))
            LAST.op = "repeat"
            return data, f"repeated {where}"
    return _set(data, where, "number", src.pick(HOSTILE_NUMBERS)), f"number at {where}"


def to_yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6).encode("utf-8", "surrogatepass")


# --- text mutations ---------------------------------------------------------------------------

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)))


def mutate_text(src: Source, text: str) -> tuple[bytes, str]:
    """One change to the bytes of a file: cut, binary bytes, NUL, BOM, empty, an alias bomb or a
    recursive alias, a key written twice, a very long line, CRLF line ends."""
    lines = text.splitlines(keepends=True) or [""]
    op = src.pick(["truncate", "binary", "nul", "empty", "bom", "bomb", "recursive", "duplicate",
                   "long", "crlf", "invalid-utf8", "swap"])
    raw = text.encode()
    if op == "truncate":
        return raw[:src.integer(0, max(0, len(raw) - 1))], op
    if op == "binary":
        at = src.integer(0, len(raw))
        return raw[:at] + bytes(src.integer(0, 255) for _ in range(16)) + raw[at:], op
    if op == "nul":
        at = src.integer(0, len(raw))
        return raw[:at] + b"\x00" + raw[at:], op
    if op == "empty":
        return src.pick([b"", b"\n", b"   \n", b"---\n", b"null\n", b"[]\n", b"{}\n", b"42\n"]), op
    if op == "bom":
        return b"\xef\xbb\xbf" + raw, op
    if op == "bomb":
        return (BOMB + text).encode(), op
    if op == "recursive":
        return (text + "\nzz: &r [*r]\n").encode(), op
    if op == "duplicate":
        i = src.integer(0, len(lines) - 1)
        return "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]).encode(), op
    if op == "long":
        i = src.integer(0, len(lines) - 1)
        return "".join(lines[:i] + [lines[i].rstrip("\n") + "x" * src.pick([10_000, 200_000]) + "\n"]
                       + lines[i + 1:]).encode(), op
    if op == "crlf":
        return text.replace("\n", "\r\n").encode(), op
    if op == "invalid-utf8":
        return raw + b"\xff\xfe\xc3(", op
    i, j = src.integer(0, len(lines) - 1), src.integer(0, len(lines) - 1)
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines).encode(), "swap"


# --- case kinds -------------------------------------------------------------------------------

CLUSTERS = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
CLUSTER_NAMES = [("name",), ("node_pools", 0, "name"), ("node_pools", 0, "gpu"), ("storage", 0, "name"),
                 ("fabric", "switch"), ("node_pools", 0, "nic"), ("description",)]
CLUSTER_COMMANDS = [["topology", "--cluster", "{f}"], ["cost", "{f}"], ["reliability", "{f}", "--gpus", "8"],
                    ["facility", "{f}"], ["comm", "--cluster", "{f}", "-e", "1M"], ["topology", "--cluster", "{f}", "--json"]]
SLOW_CLUSTER_COMMANDS = [["check", "{f}"], ["plan", "train", "--cluster", "{f}", "--model", "llama2-7b", "--tokens", "1B"],
                         ["plan", "serve", "--cluster", "{f}", "--model", "llama2-7b", "--rate", "5"],
                         ["facility", "{f}", "--model", "llama2-7b"]]
JOBS = sorted(p.name for p in (EXAMPLES / "jobs").iterdir())
SCENARIOS = ["failures-256-nodes.yaml", "shared-vs-partitioned.yaml"]
SCENARIO_NAMES = [("name",), ("workloads", 0, "name"), ("cluster", "name"), ("cluster", "node_pools", 0, "name"),
                  ("description",), ("policy",)]
FILE_NAMES = ["in", "in[/x]", "in [estimate]", "in\x1b]0;T\x07", "in\u202e"]


def _file_name(src: Source, suffix: str) -> str:
    return src.pick(FILE_NAMES[:1] * 6 + FILE_NAMES[1:]) + suffix


def _mutated_yaml(src: Source, text: str, names: Sequence[tuple]) -> tuple[bytes, str]:
    if src.pick([True, True, False]):
        data, note = mutate_data(src, yaml.safe_load(text), names)
        return to_yaml(data), note
    return mutate_text(src, text)


def cluster_case(src: Source, slow: bool) -> Case:
    example = src.pick(CLUSTERS)
    body, note = _mutated_yaml(src, (EXAMPLES / example).read_text(), CLUSTER_NAMES)
    name = _file_name(src, ".yaml")
    cmd = src.pick(CLUSTER_COMMANDS + (SLOW_CLUSTER_COMMANDS if slow else []))
    return Case("cluster", [a.replace("{f}", "{dir}/" + name) for a in cmd], {name: body}, f"{example}: {note}")


def job_case(src: Source, slow: bool) -> Case:
    example = src.pick(JOBS)
    text = (EXAMPLES / "jobs" / example).read_text()
    refuse = False
    suffix = Path(example).suffix
    if suffix == ".json" and src.pick([True, False]):
        data = json.loads(text) if not example.startswith("broken") else {"train_batch_size": 8}
        data, note = mutate_data(src, data, [("train_batch_size",), ("train_micro_batch_size_per_gpu",),
                                             ("gradient_accumulation_steps",)], focus=list(DS_RULES))
        body = json.dumps(data, allow_nan=True).encode()
        refuse = LAST.value != "auto" and must_refuse(DS_RULES)
    elif suffix in (".yaml", ".yml") and src.pick([True, False]):
        docs = list(yaml.safe_load_all(text))
        i = src.integer(0, len(docs) - 1)
        docs[i], note = mutate_data(src, docs[i], [("metadata", "name"), ("kind",)])
        body = yaml.safe_dump_all(docs, allow_unicode=True, width=10**6).encode("utf-8", "surrogatepass")
    elif src.pick([True, False]):
        lines = text.splitlines()
        i = src.integer(0, max(0, len(lines) - 1))
        word = src.pick(HOSTILE_STRINGS + [str(x) for x in HOSTILE_NUMBERS])
        lines[i:i] = [src.pick([f"#SBATCH --nodes={word}", f"NCCL_DEBUG={word}", f"export NCCL_SOCKET_IFNAME={word}",
                                f"torchrun --nproc_per_node={word} --nnodes 2 t.py", f"srun {word}", word])]
        body, note = "\n".join(lines).encode("utf-8", "surrogatepass"), "hostile line"
    else:
        body, note = mutate_text(src, text)
    name = _file_name(src, suffix)
    # Most cases run the job-file rules only: the cluster rules (a training plan search, ~0.6
    # CPU-s) read nothing from the job file; one in eight runs them all.
    rules = [] if src.pick([True] + [False] * 7) else [a for r in JOB_RULES for a in ("--rule", r)]
    return Case("job", ["check", str(EXAMPLES / "h100-64-ib.yaml"), "--job", "{dir}/" + name, *rules],
                {name: body}, f"{example}: {note}", refuse)


JOB_RULES = ["job-parse", "deepspeed-batch", "k8s-gpus", "nccl-debug", "nccl-ib-disabled", "nccl-socket-ifname",
             "sbatch-exclusive", "sbatch-gres"]


def model_case(src: Source, slow: bool) -> Case:
    from gpucluster.specs.workload import model_presets

    preset = src.pick(["llama2-7b", "llama3-70b", "deepseek-v3", "mixtral-8x7b"])
    spec = model_presets().get(preset).model.model_dump(mode="json", exclude_none=True)
    body, note = _mutated_yaml(src, yaml.safe_dump(spec, sort_keys=False), [("name",)])
    name = _file_name(src, ".yaml")
    cmd = src.pick([["models", "{f}"], ["models", "{f}", "--json"], ["cost", str(EXAMPLES / "h100-64-ib.yaml"), "--model", "{f}"]]
                   + ([["advise", "--model", "{f}"], ["plan", "train", "--gpu", "H100:8", "--nodes", "2", "--model", "{f}",
                                                      "--tokens", "1B"]] if slow else []))
    return Case("model", [a.replace("{f}", "{dir}/" + name) for a in cmd], {name: body}, f"{preset}: {note}")


def price_case(src: Source, slow: bool) -> Case:
    data = {"pue": 1.3, "fte_usd_per_year": 150000, "usd_per_kwh": 0.1, "utilization_fraction": 0.8}
    LAST.op = ""
    body, note = _mutated_yaml(src, yaml.safe_dump(data), [("pue",), ("usd_per_kwh",)])
    return Case("prices", ["cost", str(EXAMPLES / "h100-64-ib.yaml"), "--prices", "{dir}/p.yaml"], {"p.yaml": body}, note,
                must_refuse(PRICE_RULES))



def scenario_case(src: Source, slow: bool) -> Case:
    example = src.pick(SCENARIOS)
    data = yaml.safe_load((EXAMPLES / "scenarios" / example).read_text())
    data["horizon_days"] = 2                      # a short run: the mutation, not the horizon, is tested
    body, note = _mutated_yaml(src, yaml.safe_dump(data, sort_keys=False), SCENARIO_NAMES)
    return Case("scenario", ["simulate", "{dir}/s.yaml"], {"s.yaml": body}, f"{example}: {note}")


def trace_case(src: Source, slow: bool) -> Case:
    """A short openb or Gavel trace with a hostile header, cell or line, behind a scenario."""
    fmt = src.pick(["openb", "gavel"])
    source = SHARED / "traces" / ("openb_pod_list_default.csv" if fmt == "openb" else "philly/2869ce.trace")
    lines = source.read_text().splitlines()[:40] if source.exists() else ["name,num_gpu", "a,1"]
    i = src.integer(0, len(lines) - 1)
    sep = "," if fmt == "openb" else "\t"
    cells = lines[i].split(sep)
    j = src.integer(0, len(cells) - 1)
    cells[j] = str(src.pick(HOSTILE_STRINGS + [str(x) for x in HOSTILE_NUMBERS]))
    lines[i] = sep.join(cells)
    trace = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if src.pick([False, False, True]):
        trace, _ = mutate_text(src, trace.decode("utf-8", "replace"))
    scenario = yaml.safe_load((EXAMPLES / "scenarios" / "philly-gavel.yaml").read_text())
    scenario["horizon_days"] = 1
    scenario["workloads"] = [{"kind": "trace", "name": "tr", "format": fmt, "path": "t.csv"}]
    if fmt == "gavel":
        scenario["workloads"][0]["runtimes"] = str(SHARED / "traces" / "philly" / "philly_runtime.csv")
    return Case("trace", ["simulate", "{dir}/s.yaml"], {"s.yaml": to_yaml(scenario), "t.csv": trace},
                f"{fmt} line {i} cell {j}")


# --- wrong accepts: values the case knows are invalid ---------------------------------------

@dataclass(frozen=True)
class Rule:
    """The values a field may hold. `strict`: bools and numeric strings are wrong too (a strict
    schema); otherwise they are left undecided (a lax reader may convert "8" or true)."""
    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False
    lo_open: bool = False
    strict: bool = False
    optional: bool = False
    pattern: str | None = None           # a name: the whole value must match


def invalid(value: Any, rule: Rule) -> bool | None:
    """True: `value` is known to be wrong for the field; False: known right; None: undecided."""
    import re

    if value is None:
        return not rule.optional if rule.strict or rule.pattern is not None else (None if rule.optional else True)
    if rule.pattern is not None:
        return not (isinstance(value, str) and re.fullmatch(rule.pattern, value) is not None)
    if isinstance(value, bool) or isinstance(value, str):
        if rule.strict:
            return True
        if isinstance(value, bool):
            return None
        try:
            value = float(value)
        except ValueError:
            return True
        return None if math.isfinite(value) and rule.lo <= value <= rule.hi else True
    if not isinstance(value, (int, float)):
        return True                      # a list or a mapping where a number belongs
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if rule.integer and isinstance(value, float) and (rule.strict or not value.is_integer()):
        return True
    if value < rule.lo or value > rule.hi or (rule.lo_open and value == rule.lo):
        return True
    return False


def _matches(pattern: tuple, path: tuple) -> bool:
    return len(pattern) == len(path) and all(a == "*" or a == b for a, b in zip(pattern, path, strict=True))


def must_refuse(rules: dict[tuple, Rule], required: Sequence[tuple] = ()) -> bool:
    """Whether the last mutation (LAST) made the document invalid by the rules."""
    if LAST.op == "delete":
        return any(_matches(r, LAST.where) for r in required)
    if LAST.op in ("number", "string", "type", "nest"):
        for pattern, rule in rules.items():
            if _matches(pattern, LAST.where):
                return invalid(LAST.value, rule) is True
    return False


DATA = Path(__file__).resolve().parent / "data"

PRICE_RULES = {("pue",): Rule(1, math.inf), ("usd_per_kwh",): Rule(0, math.inf),
               ("fte_usd_per_year",): Rule(0, math.inf), ("utilization_fraction",): Rule(0, 1, lo_open=True)}
DS_RULES = {(k,): Rule(1, 2**31 - 1, integer=True, strict=True)
            for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
COUNT = Rule(1, 1_000_000, integer=True, strict=True)
BIG = Rule(1, 2**31 - 1, integer=True, strict=True)
NAME_RX = r"[A-Za-z0-9][A-Za-z0-9._+-]*"
PLAN_RULES: dict[tuple, Rule] = {
    ("target", "nodes"): COUNT, ("target", "gpus"): Rule(1, 1_000_000, integer=True, strict=True, optional=True),
    ("target", "gpus_per_node"): Rule(1, 1024, integer=True, strict=True, optional=True),
    ("target", "gpu"): Rule(pattern=NAME_RX, optional=True), ("target", "scale_out_link"): Rule(pattern=NAME_RX, optional=True),
    **{("best", "layout", k): COUNT for k in ("tp", "pp", "dp", "cp", "ep", "interleave")},
    ("best", "layout", "micro_batch"): BIG, ("best", "layout", "global_batch"): BIG,
    ("best", "layout", "zero"): Rule(0, 3, integer=True, strict=True),
    ("best", "step_s"): Rule(0, math.inf, strict=True), ("seq_len",): BIG,
    ("layers",): Rule(1, 1_000_000, integer=True, strict=True, optional=True),
    ("model",): Rule(pattern=r"[A-Za-z0-9][A-Za-z0-9 ._+(),/:-]*"),
}
PLAN_REQUIRED = [("schema",), ("model",), ("seq_len",), ("target",), ("best",), ("target", "nodes"),
                 ("best", "layout"), ("best", "step_s"),
                 *[("best", "layout", k) for k in ("tp", "pp", "dp", "micro_batch", "global_batch")]]
PLAN_COMMANDS = [["generate", "slurm", "{f}"], ["generate", "torchrun", "{f}"], ["generate", "deepspeed", "{f}"],
                 ["generate", "k8s", "{f}"]]


def plan_case(src: Source, slow: bool) -> Case:
    """A `plan train --json` document mutated, turned into job files by `generate`."""
    data = json.loads((DATA / "plan-13b.json").read_text())
    if src.pick([True, True, True, False]):
        data, note = mutate_data(src, data, [("model",), ("target", "gpu"), ("target", "nic")], focus=list(PLAN_RULES))
        body, refuse = json.dumps(data, allow_nan=True).encode(), must_refuse(PLAN_RULES, PLAN_REQUIRED)
    else:
        body, note = mutate_text(src, json.dumps(data, indent=1))
        refuse = False
    name = _file_name(src, ".json")
    cmd = src.pick(PLAN_COMMANDS)
    return Case("plan", [a.replace("{f}", "{dir}/" + name) for a in cmd], {name: body}, note, refuse)


FINITE0 = Rule(0, math.inf)
RESULT_DOCS = {
    "collective": {"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "backend": "nccl", "world_size": 16,
                   "nodes": 2, "wrong_total": 0,
                   "rows": [{"size_bytes": 1048576, "time_us": 120.5, "algbw_gbps": 8.7, "busbw_gbps": 16.3, "wrong": 0,
                             "placement": "out-of-place",
                             "in_place": {"time_us": 119.0, "algbw_gbps": 8.8, "busbw_gbps": 16.5, "wrong": 0}},
                            {"size_bytes": 134217728, "time_us": 3100.0, "algbw_gbps": 43.3, "busbw_gbps": 81.2,
                             "wrong": 0}]},
    "storage": {"schema": "gpucluster-bench-storage/v1", "path": "/scratch/bench", "size_bytes": 1073741824,
                "write_gbps": 1.8, "read_gbps": 3.2},
    "simulation": {"schema": "gpucluster-simulation/v1", "scenario": "s", "policy": "fifo",
                   "utilization": {"allocation": 0.5, "busy": 0.4}, "gpu_hours": {"useful": 2.0, "lost": 0.5},
                   "jobs": {"total": 3, "completed": 2, "failed": 1, "not_run": {}}, "goodput": 0.9,
                   "classes": {"llm": {"wait_s": {"mean": 5.0, "p99": None}, "jct_s": {"p50": 60.0}}},
                   "cost": {"on_prem_usd": 10.0, "cloud_usd": None}},
}
RESULT_RULES: dict[str, dict[tuple, Rule]] = {
    "collective": {**{("rows", "*", k): FINITE0 for k in ("time_us", "algbw_gbps", "busbw_gbps")},
                   **{("rows", "*", "in_place", k): FINITE0 for k in ("time_us", "algbw_gbps", "busbw_gbps")},
                   ("rows", "*", "size_bytes"): Rule(0, math.inf, integer=True),
                   ("world_size",): Rule(1, 2**20, integer=True), ("nodes",): Rule(1, 16, integer=True)},
    "storage": {("write_gbps",): Rule(0, math.inf, strict=True), ("read_gbps",): Rule(0, math.inf, strict=True)},
    "simulation": {("utilization", "allocation"): Rule(0, 1, strict=True), ("utilization", "busy"): Rule(0, 1, strict=True),
                   ("gpu_hours", "useful"): Rule(0, math.inf, strict=True), ("gpu_hours", "lost"): Rule(0, math.inf, strict=True),
                   ("goodput",): Rule(0, 1, strict=True, optional=True),
                   ("classes", "llm", "wait_s", "mean"): Rule(0, math.inf, strict=True, optional=True),
                   ("classes", "llm", "jct_s", "p50"): Rule(0, math.inf, strict=True, optional=True),
                   ("jobs", "completed"): Rule(0, math.inf, integer=True, strict=True),
                   ("jobs", "failed"): Rule(0, math.inf, integer=True, strict=True),
                   ("cost", "on_prem_usd"): Rule(0, math.inf, strict=True, optional=True)},
}
RESULT_REQUIRED: dict[str, list[tuple]] = {"collective": [("schema",), ("op",), ("world_size",), ("rows",),
                                  *[("rows", "*", k) for k in ("time_us", "algbw_gbps", "busbw_gbps", "size_bytes")]],
                   "storage": [("schema",), ("write_gbps",), ("read_gbps",), ("path",)],
                   "simulation": [("schema",)]}


def result_case(src: Source, slow: bool) -> Case:
    """A bench collective, bench storage or simulate result, mutated, read by `metrics` (and
    `diagnose` for collectives)."""
    which = src.pick(list(RESULT_DOCS))
    data = RESULT_DOCS[which]
    if src.pick([True, True, True, False]):
        data, note = mutate_data(src, data, [("scenario",), ("policy",), ("path",), ("backend",)],
                                 focus=list(RESULT_RULES[which]))
        body, refuse = json.dumps(data, allow_nan=True).encode(), must_refuse(RESULT_RULES[which], RESULT_REQUIRED[which])
    else:
        body, note = mutate_text(src, json.dumps(data, indent=1))
        refuse = False
    cmds = [["metrics", "{f}"], ["metrics", "{f}", "--openmetrics"], ["metrics", "{f}", "-o", "{dir}/out.prom"]]
    if which == "collective":
        cmds.append(["diagnose", "{f}", "--cluster", str(EXAMPLES / "h100-64-ib.yaml")])
    cmd = src.pick(cmds)
    if cmd[0] == "diagnose":
        refuse = refuse and not LAST.where[:1] == ("nodes",)      # diagnose may ignore the node count
    return Case("result", [a.replace("{f}", "{dir}/r.json") for a in cmd], {"r.json": body}, f"{which}: {note}", refuse)


# Command lines with a hostile value in one option: (argv, whether the value is known to be wrong).
PLAN_FILE = str(DATA / "plan-13b.json")
CLUSTER_FILE = str(EXAMPLES / "h100-64-ib.yaml")
OPTION_TEMPLATES: list[tuple[list[str], Any]] = [
    (["generate", "slurm", PLAN_FILE, "--time", "{v}"], "slurm-time"),
    (["generate", "slurm", PLAN_FILE, "--job-name", "{v}"], None),
    (["generate", "k8s", PLAN_FILE, "--job-name", "{v}"], None),
    (["generate", "slurm", PLAN_FILE, "--partition", "{v}"], None),
    (["generate", "slurm", PLAN_FILE, "-o", "{v}"], None),
    (["generate", "torchrun", PLAN_FILE, "--script", "{v}"], None),
    (["reliability", CLUSTER_FILE, "--interval", "{v}"], None),
    (["reliability", CLUSTER_FILE, "--nodes", "{v}"], Rule(1, 8, integer=True)),
    (["reliability", CLUSTER_FILE, "--gpus", "{v}"], Rule(1, 10_000_000, integer=True)),   # job sizes, any cluster
    (["cost", CLUSTER_FILE, "--tokens", "{v}", "--model", "llama2-7b"], None),
    (["cost", CLUSTER_FILE, "--years", "{v}"], Rule(0, 100, lo_open=True)),
    (["cost", CLUSTER_FILE, "--utilization", "{v}"], Rule(0, 1, lo_open=True)),
    (["cost", CLUSTER_FILE, "--price", "pue={v}"], Rule(1, math.inf)),
    (["cost", CLUSTER_FILE, "--price", "usd_per_kwh={v}"], Rule(0, math.inf)),
    (["comm", "--cluster", CLUSTER_FILE, "-e", "{v}"], None),
    (["comm", "--cluster", CLUSTER_FILE, "--gpus", "{v}"], Rule(1, 64, integer=True)),
    (["topology", "--cluster", CLUSTER_FILE, "--pool", "{v}"], None),
    (["metrics", "{v}"], None),
    (["models", "{v}"], None),
    (["facility", "{v}"], None),
]
OPTION_VALUES = ["-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e999", "1e999T", "9223372036854775808", "1000000000",
                 "0.5", "1", "8", "abc", "", " ", "1st-run", "\u00e9t\u00e9", "\u2603\u2603", "lab [/x]", "[bold]x",
                 "\x1b]0;T\x07", "a\nb", "a" * 5000, "/dev/zero", "/dev/null", "/nonexistent/dir/x", "/", ".",
                 "{dir}", "{dir}/fifo", "/proc/self/mem", "-5:00", "1-00:00:00", "UNLIMITED", "30", "30m", "48:00:00",
                 "99:99:99", "1:2:3:4"]


def option_case(src: Source, slow: bool) -> Case:
    argv, rule = src.pick(OPTION_TEMPLATES)
    value = src.pick(OPTION_VALUES)
    if "-o" in argv and value.startswith(("/dev", "/proc")):
        # Never an output path outside the case's folder but missing ones: a regression in the
        # writer's guard (files.replaceable) must not rename over /dev/null on this machine.
        value = "{dir}/fifo"
    refuse = False
    if isinstance(rule, Rule):
        try:
            number: Any = float(value)
        except ValueError:
            number = "x"                 # not a number: an option of a number type refuses it
        if number != "x" and rule.integer and math.isfinite(number) and not number.is_integer():
            refuse = True
        else:
            refuse = invalid(number, rule) is True
    elif rule == "slurm-time":
        refuse = slurm_time_invalid(value)
    fifos = ["fifo"] if value == "{dir}/fifo" else []
    return Case("option", [a.replace("{v}", value) for a in argv], {}, f"{' '.join(argv[:2])} {value[:40]!r}", refuse,
                fifos)


def slurm_time_invalid(value: str) -> bool:
    """Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED / INFINITE."""
    import re

    if value in ("UNLIMITED", "INFINITE", "unlimited", "infinite"):
        return False
    return re.fullmatch(r"\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}", value) is None


def node_list_case(src: Source, slow: bool) -> Case:
    """An openb node list (the cluster of an openb trace) with a hostile cell, behind a scenario."""
    source = SHARED / "traces" / "openb_node_list_gpu_node.csv"
    lines = source.read_text().splitlines()[:30] if source.exists() else ["sn,cpu_milli,memory_mib,num_gpu,model",
                                                                           "n1,96000,786432,8,V100M32"]
    i = src.integer(0, len(lines) - 1)
    cells = lines[i].split(",")
    j = src.integer(0, len(cells) - 1)
    cells[j] = str(src.pick(HOSTILE_STRINGS + [str(x) for x in HOSTILE_NUMBERS] + ["100000000000000000000"]))
    lines[i] = ",".join(cells)
    body = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if src.pick([False, False, True]):
        body, _ = mutate_text(src, body.decode("utf-8", "replace"))
    pods = SHARED / "traces" / "openb_pod_list_default.csv"
    pod_lines = pods.read_text().splitlines()[:40] if pods.exists() else ["name,num_gpu", "a,1"]
    scenario = yaml.safe_load((EXAMPLES / "scenarios" / "openb-fill.yaml").read_text())
    scenario["horizon_days"] = 0.01
    scenario["nodes_csv"] = "n.csv"
    scenario["workloads"][0]["path"] = "t.csv"
    return Case("nodes", ["simulate", "{dir}/s.yaml"], {"s.yaml": to_yaml(scenario), "n.csv": body,
                                                       "t.csv": ("\n".join(pod_lines) + "\n").encode()},
                f"node line {i} cell {j}")


KINDS = {"cluster": cluster_case, "job": job_case, "model": model_case, "prices": price_case,
         "scenario": scenario_case, "trace": trace_case, "plan": plan_case, "result": result_case,
         "option": option_case, "nodes": node_list_case}
FAST_KINDS = ("cluster", "cluster", "cluster", "job", "model", "prices", "plan", "result", "option")


def make_case(src: Source, slow: bool = False) -> Case:
    """`slow=False`: only commands that answer in well under a second (the in-`make test` slice)."""
    kind = src.pick(list(KINDS) + ["cluster", "job"] if slow else list(FAST_KINDS))
    return KINDS[kind](src, slow)


# --- the oracle -------------------------------------------------------------------------------

def classify(code: int | str | None, out: str, err: str, refuse: bool = False) -> list[str]:
    """What is wrong with one run: [] when the run kept every promise. `code` is the exit
    status, or "timeout" / "memory" when the runner stopped it; `refuse`: the input holds a value
    the case knows is invalid, so exit 0 is a wrong accept (an error, exit 2, or a finding, exit 1,
    is right)."""
    if code in ("timeout", "memory"):
        return [{"timeout": "hang", "memory": "memory"}[str(code)]]
    problems = []
    if refuse and code == 0:
        problems.append("wrong-accept")
    if "Traceback (most recent call last)" in out + err or code not in (0, 1, 2):
        problems.append("traceback" if "MemoryError" not in err else "memory")
    if "MarkupError" in out + err or any(eaten in out + err for eaten in MARKUP_PROBES.values()):
        problems.append("markup")
    if "\x1b" in out + err or "\x07" in out + err or "\x9b" in out + err:
        problems.append("escape")
    if code == 2 and len(err.strip().splitlines()) != 1:
        problems.append("not-one-line")
    return problems


# --- running a case in this process (the pytest slice) ---------------------------------------

class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` in the code under
    test can swallow it."""


def run_in_process(argv: list[str], timeout_s: float = 60.0, cwd: Path | None = None) -> tuple[int | str, str, str]:
    """`gpucluster ARGV` through the real entry point (`main`: its UserError -> one line, exit 2
    handling included), with stdout and stderr captured; ("timeout", ...) past `timeout_s`. In
    `cwd` (the case's folder): a relative output path (`-o 30`) lands there, not in the checkout."""
    import contextlib
    import io
    import signal
    import sys
    import traceback

    from gpucluster.cli import app as app_module

    out, err = io.StringIO(), io.StringIO()
    code: int | str = 0

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    old_handler, old_argv = signal.signal(signal.SIGALRM, on_alarm), sys.argv
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        sys.argv = ["gpucluster", *argv]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                contextlib.chdir(cwd or Path.cwd()):
            try:
                app_module.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except CaseTimeout:
                code = "timeout"
            except Exception:                       # what a user would see as a traceback
                traceback.print_exc(file=err)
                code = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.argv = old_argv
    return code, out.getvalue(), err.getvalue()
