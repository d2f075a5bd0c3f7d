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
    "tab\there", "new\nline", "cr\rreturn", "nul\x00byte", "", " ", "é☃𝔘", "a" * 5000, "-1", "nan", "1e999",
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

    def args(self, folder: Path) -> list[str]:
        return [a.replace("{dir}", str(folder)) for a in self.argv]

    def write(self, folder: Path) -> None:
        for name, data in self.files.items():
            path = folder / name                  # "in[/x].yaml" is the file x].yaml in a folder in[
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


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


def mutate_data(src: Source, data: Any, name_keys: Sequence[tuple] = ()) -> tuple[Any, str]:
    """One structural change: a hostile value at a random place, a name made hostile, a key
    removed or added, a subtree nested deep or repeated."""
    data = copy.deepcopy(data)
    op = src.pick(["number", "string", "type", "name", "name", "delete", "unknown", "nest", "repeat"])
    if op == "name" and name_keys:
        path = src.pick(list(name_keys))
        try:
            return set_at(data, path, src.pick(HOSTILE_STRINGS)), f"name {path}"
        except (KeyError, IndexError, TypeError):
            op = "string"
    where = src.pick(paths(data))
    if op in ("number", "name"):
        return set_at(data, where, src.pick(HOSTILE_NUMBERS)), f"number at {where}"
    if op == "string":
        return set_at(data, where, src.pick(HOSTILE_STRINGS)), f"string at {where}"
    if op == "type":
        return set_at(data, where, src.pick(WRONG_TYPES)), f"type at {where}"
    if op == "delete" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        del parent[where[-1]]
        return data, f"delete {where}"
    if op == "unknown":
        target = data
        for p in where:
            target = target[p]
        if isinstance(target, dict):
            target[src.pick(HOSTILE_STRINGS[:12] + ["colour"])] = src.pick(HOSTILE_NUMBERS)
            return data, f"unknown key at {where}"
    if op == "nest":
        value: Any = 1
        for _ in range(src.integer(10, 200)):
            value = [value]
        return set_at(data, where, value), f"nested at {where}"
    if op == "repeat" and where:
        parent = data
        for p in where[:-1]:
            parent = parent[p]
        if isinstance(parent, list):
            parent.extend([parent[where[-1]]] * src.integer(2, 300))
            return data, f"repeated {where}"
    return set_at(data, where, src.pick(HOSTILE_NUMBERS)), f"number at {where}"


def to_yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6).encode("utf-8", "surrogatepass")


# --- text mutations ---------------------------------------------------------------------------

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")))


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
    suffix = Path(example).suffix
    if suffix == ".json" and src.pick([True, False]):
        data = json.loads(text) if not example.startswith("broken") else {"train_batch_size": 8}
        data, note = mutate_data(src, data, [("train_batch_size",), ("train_micro_batch_size_per_gpu",),
                                             ("gradient_accumulation_steps",)])
        body = json.dumps(data, allow_nan=True).encode()
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
    return Case("job", ["check", str(EXAMPLES / "h100-64-ib.yaml"), "--job", "{dir}/" + name],
                {name: body}, f"{example}: {note}")


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
    body, note = _mutated_yaml(src, yaml.safe_dump(data), [("pue",), ("usd_per_kwh",)])
    return Case("prices", ["cost", str(EXAMPLES / "h100-64-ib.yaml"), "--prices", "{dir}/p.yaml"], {"p.yaml": body}, note)


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


KINDS = {"cluster": cluster_case, "job": job_case, "model": model_case, "prices": price_case,
         "scenario": scenario_case, "trace": trace_case}
FAST_KINDS = ("cluster", "cluster", "cluster", "job", "model", "prices")


def make_case(src: Source, slow: bool = False) -> Case:
    """`slow=False`: only commands that answer in well under a second (the in-`make test` slice)."""
    kind = src.pick(list(KINDS) + ["cluster", "job"] if slow else list(FAST_KINDS))
    return KINDS[kind](src, slow)


# --- the oracle -------------------------------------------------------------------------------

def classify(code: int | str | None, out: str, err: str) -> list[str]:
    """What is wrong with one run: [] when the run kept every promise. `code` is the exit
    status, or "timeout" / "memory" when the runner stopped it."""
    if code in ("timeout", "memory"):
        return [{"timeout": "hang", "memory": "memory"}[str(code)]]
    problems = []
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


def run_in_process(argv: list[str], timeout_s: float = 60.0) -> tuple[int | str, str, str]:
    """`gpucluster ARGV` through the real entry point (`main`: its UserError -> one line, exit 2
    handling included), with stdout and stderr captured; ("timeout", ...) past `timeout_s`."""
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
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
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
