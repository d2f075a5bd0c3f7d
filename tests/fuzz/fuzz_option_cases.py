"""Fuzz cases for every option of every command (issue 23 items 1, 3, 10):

- `anyopt`: a command from a working baseline, one of its options (or positional arguments) found
  by walking the CLI itself (so an option added later is reached without an edit here) given a
  hostile value: non-finite, huge, negative, zero, wrong type, markup, control and bidi
  characters, output paths of every kind (inside the case's folder), input paths that are a FIFO,
  a device or a folder. Known wrong (exit 0 is a wrong accept): text for an integer option, a
  non-finite or non-numeric value for a number option, and a control or bidi character in a value
  written into a script or a config (`generate`, `slurm submit/bench`, `init`).
- `init`: `gpucluster init` with one option hostile, judged by this file's own table of each
  option's range (nodes, GPUs and NICs per node, names, catalog names, output targets).
- `local`: `bench collective --local N [--oversubscribe]`: N must be 1..cores without
  --oversubscribe and 1..max(8, 4 x cores) with it; every case ends at a refusal that comes after
  that check (`--out` names a folder), so no rank is ever started and the error names the option
  that was wrong.
"""

from __future__ import annotations

import math
import os
import re
import typing
from functools import cache
from pathlib import Path
from typing import Any

from fuzz_api_cases import CLUSTER, STORAGE, SWEEP, TARGETS, TINY_SCENARIO, VALIDATION
from fuzz_mutations import Case, Source

ROOT = Path(__file__).resolve().parents[2]
PLAN_FILE = str(Path(__file__).resolve().parent / "data" / "plan-13b.json")
COLLECTIVE = (b'{"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "backend": "gloo", "world_size": 16, '
              b'"nodes": 2, "wrong_total": 0, "rows": [{"size_bytes": 1048576, "time_us": 120.5, "algbw_gbps": 8.7, '
              b'"busbw_gbps": 16.3, "wrong": 0}]}')
STUBS = {"bin/sbatch": b"#!/bin/sh\necho 'Submitted batch job 5'\n", "bin/squeue": b"#!/bin/sh\nexit 1\n",
         "bin/sacct": b"#!/bin/sh\nexit 1\n", "bin/scontrol": b"#!/bin/sh\nexit 1\n"}
FILES = {"s.yaml": TINY_SCENARIO, "v.yaml": VALIDATION, "sweep.yaml": SWEEP, "storage.json": STORAGE,
         "coll.json": COLLECTIVE, "job.sbatch": b"#!/bin/bash\necho hi\n", "folder/keep": b"", **STUBS}

# A working command line for each command; ("name", value) is a positional argument named as the
# command names it. Slow commands (a plan search, a simulation) are `slow` only.
BASE: dict[str, tuple[list[Any], bool]] = {
    "init": (["init", "--gpu", "H100:8"], False),
    "catalog": (["catalog", ("name", "H100")], False),
    "models": (["models", ("name", "llama2-7b")], False),
    "schema": (["schema", ("kind", "cluster")], False),
    "topology": (["topology", "--cluster", CLUSTER], False),
    "comm": (["comm", "--cluster", CLUSTER, "-e", "1M"], False),
    "validate": (["validate", ("files", "{dir}/v.yaml")], False),
    "cost": (["cost", ("cluster", CLUSTER)], False),
    "reliability": (["reliability", ("cluster", CLUSTER), "--gpus", "8"], False),
    "facility": (["facility", ("cluster", CLUSTER)], False),
    "diagnose": (["diagnose", ("results", "{dir}/coll.json"), "--cluster", CLUSTER], False),
    "metrics": (["metrics", ("result", "{dir}/storage.json")], False),
    "generate slurm": (["generate", "slurm", ("plan", PLAN_FILE)], False),
    "generate torchrun": (["generate", "torchrun", ("plan", PLAN_FILE)], False),
    "generate deepspeed": (["generate", "deepspeed", ("plan", PLAN_FILE)], False),
    "generate k8s": (["generate", "k8s", ("plan", PLAN_FILE)], False),
    "generate kueue": (["generate", "kueue", ("cluster", CLUSTER)], False),
    "slurm submit": (["slurm", "submit", ("target", "{dir}/job.sbatch"), "--timeout", "2"], False),
    "slurm status": (["slurm", "status", ("job_id", "5"), "--timeout", "2"], False),
    "slurm import": (["slurm", "import", "--out", "{dir}/t.txt", "--timeout", "2"], False),
    "slurm bench": (["slurm", "bench", "--wait", "1", "--poll", "0.2", "--timeout", "2", "--out-dir", "{dir}"], False),
    # `--out` and `--metrics` name a folder: refused after the option checks, before a rank starts
    # (one of them stays a folder when the other is the option under test).
    "bench collective": (["bench", "collective", "--min", "8", "--max", "8", "--iters", "1", "--warmup", "0",
                          "--local", "1", "--timeout", "30", "--out", "{dir}/folder", "--metrics", "{dir}/folder"],
                         False),
    # `--metrics` names a folder: refused after the size checks, before a byte is written.
    "bench storage": (["bench", "storage", ("path", "{dir}"), "--size", "64K", "--block", "16K",
                       "--metrics", "{dir}/folder"], False),
    # Without a GPU both end at "skipped" once their options are checked (torch imported: ~4 CPU-s).
    "bench gemm": (["bench", "gemm", "--sizes", "8", "--iters", "1"], True),
    "bench hbm": (["bench", "hbm", "--size", "1K", "--iters", "1"], True),
    "check": (["check", ("cluster", CLUSTER), "--rule", "nccl-debug"], True),
    "advise": (["advise", "--model", "llama2-7b", "--tokens", "1B"], True),
    "sweep": (["sweep", ("spec", "{dir}/sweep.yaml"), "--workers", "1"], True),
    "simulate run": (["simulate", "run", ("scenario", "{dir}/s.yaml")], True),
    "simulate compare": (["simulate", "compare", ("scenario", "{dir}/s.yaml"), "--policies", "fifo"], True),
    "plan train": (["plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--tokens", "1B", "--top", "1"], True),
    "plan serve": (["plan", "serve", "--model", "llama2-7b", "--gpu", "H100:8", "--rate", "5", "--top", "1"], True),
}
# Options left alone: they start real work a hostile value cannot reach (a Ray cluster, a GPU, a
# calibration written into the package), or follow a job for as long as --wait says.
SKIP = {"--ray", "--write-calibration", "--follow", "--list-rules", "--list", "--help"}
OUTPUTS = {"--out", "--output", "-o", "--html", "--events", "--metrics", "--scenario", "--out-dir"}
INPUTS = {"cluster", "--cluster", "--prices", "--job", "--partitions", "--deepspeed-config", "--interfaces", "results",
          "plan", "spec", "scenario", "files", "result", "target", "--model"}
# Text written into a script or a config: a control or bidi character there is refused (Trojan Source).
SCRIPT_COMMANDS = ("generate slurm", "generate torchrun", "generate k8s", "generate kueue", "slurm submit",
                   "slurm bench")
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff]")

NUMBERS = ["-1", "0", "-0", "1", "8", "0.5", "nan", "NaN", "inf", "-inf", "1e999", "1e308", "1e-300", "1e9",
           "9223372036854775808", "18446744073709551616", "1" * 5000, "abc", "", " ", "1_000", " 3", "0x10", "٣"]
TEXTS = ["lab [/x]", "[bold]x", "Q1[bold]Q2", "\x1b]0;T\x07", "a\nb", "a\u202eb", "\u2066x\u2069", "a\u2028b",
         "x\x85y", "z\u200bw", "\ufeffbom", "$(id)", "'; rm -rf /", "a" * 5000, "é☃𝔘", "H100:8", "-x", "--json"]  # noqa: RUF001
IN_PATHS = ["/dev/zero", "/dev/null", "/proc/self/mem", "{dir}/fifo", "{dir}/folder", "{dir}/loop", "{dir}/nope.yaml",
            "{dir}/" + "a" * 300, "/", ""]


def _base_type(annotation: Any) -> Any:
    """int, float, str, bool or list of the annotation (Optional and Annotated unwrapped)."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        return list
    if args and origin is not None:
        inner = [a for a in args if a is not type(None)]
        return _base_type(inner[0]) if inner else str
    return annotation


@cache
def cli_options() -> dict[str, list[tuple[str, Any, bool]]]:
    """command -> [(option or positional name, its type, positional?)]: the CLI as typer built it."""
    from gpucluster.cli.app import COMMANDS, load_command

    found: dict[str, list[tuple[str, Any, bool]]] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):      # a group (typer's own click, or a lazy one)
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
            return
        params = []
        for p in command.params:
            if getattr(p, "is_flag", False) or p.name == "help":
                continue
            annotation = getattr(getattr(p, "type_descriptor", None), "annotation", str)
            positional = getattr(p, "param_type_name", "") == "argument"
            params.append((p.name if positional else p.opts[0], _base_type(annotation), positional))
        found[" ".join(path)] = params

    for name in COMMANDS:
        walk(load_command(name), [name])
    return found


def _value_for(src: Source, option: str, kind: Any) -> str:
    if option in OUTPUTS and kind is not int:
        return TARGETS[src.pick(sorted(TARGETS))]
    if option in INPUTS:
        return src.pick(IN_PATHS + TEXTS[:6])
    if kind in (int, float):
        return src.pick(NUMBERS + NUMBERS + TEXTS[:3])
    return src.pick(TEXTS + NUMBERS + IN_PATHS[:2])


def int_text(value: str) -> int | None:
    """The integer an option reads from `value` (Python's and pydantic's int(): blanks around it, a
    sign and `_` between digits allowed; ASCII digits only), or None: not an integer."""
    if re.fullmatch(r"\s*[+-]?[0-9](_?[0-9])*\s*", value) is None or len(value) > 100:
        return None
    return int(value)


def known_wrong(command: str, option: str, kind: Any, value: str) -> bool:
    """True when exit 0 would be a wrong accept (see the module's docstring)."""
    if kind is int:
        return int_text(value) is None
    if kind is float:
        try:
            return not math.isfinite(float(value))
        except ValueError:
            return True
    if command in SCRIPT_COMMANDS and option not in OUTPUTS and option not in INPUTS and kind in (str, list):
        return UNSAFE_TEXT.search(value) is not None
    return False


def anyopt_case(src: Source, slow: bool) -> Case:
    options = cli_options()
    command = src.pick([c for c, (_, s) in BASE.items() if (slow or not s) and c in options])
    base, _ = BASE[command]
    option, kind, positional = src.pick([o for o in options[command] if o[0] not in SKIP])
    value = _value_for(src, option, kind)
    argv = [item[1] if isinstance(item, tuple) else item for item in base]
    names = [item[0] if isinstance(item, tuple) else None for item in base]
    if positional:
        if option in names:
            argv[names.index(option)] = value
        else:
            argv.append(value)      # an optional positional the baseline leaves out
    elif option in base:
        argv[base.index(option) + 1] = value
    else:
        argv += [option, value]
    refuse = known_wrong(command, option, kind, value)
    return Case("anyopt", argv, dict(FILES), f"{command} {option} {value[:40]!r}", refuse, ["fifo"],
                env={"PATH": "{dir}/bin:$PATH"}, links={"loop": "{dir}/loop", "dangling": "{dir}/gone/x"},
                executables=list(STUBS))


# --- gpucluster init ----------------------------------------------------------------------------

def _printable_name(value: str) -> bool:
    return bool(value.strip()) and len(value) <= 200 and value.isprintable()


INIT_OPTIONS = ["--gpu", "--nodes", "--nics-per-node", "--nic", "--switch", "--name", "--output"]


def init_case(src: Source, slow: bool) -> Case:
    """`init` with one option hostile; the table: --nodes 1..1,000,000, a GPU count 1..1,024, NICs
    per node 1..1,024 (and a fabric that carries them), a NIC and a switch from the catalog, a
    name of 1-200 printable characters, an output that is a new or regular file."""
    option = src.pick(INIT_OPTIONS)
    argv = ["init", "--gpu", "H100:8"]
    refuse = False
    if option == "--gpu":
        count = src.pick(NUMBERS + ["8", "1024", "1025"])
        value = src.pick([f"H100:{count}", f" H100:{count}\n", f"H100\u202e:{count}", count, f"H100:{count}:2"])
        # blanks around TYPE, the colon and COUNT are the parser's (`H100: 8`), not a wrong accept
        ok = re.fullmatch(r"[0-9]{1,7}", count.strip()) is not None and 1 <= int(count) <= 1024
        refuse = not ok or value in (count, f"H100\u202e:{count}", f"H100:{count}:2")
        argv[2] = value
    elif option in ("--nodes", "--nics-per-node"):
        value = src.pick(NUMBERS + ["1000000", "1000001", "1024", "1025"])
        hi = 1_000_000 if option == "--nodes" else 1024
        n = int_text(value)
        refuse = n is None or not 1 <= n <= hi
        argv += [option, value]
        # 1,024 NICs do not fit one leaf of the default switch: a fabric error, not a wrong accept
    elif option in ("--nic", "--switch"):
        value = src.pick(TEXTS + ["NDR400", "QM9700", "ndr400", " NDR400", "NDR400\u202e"])
        refuse = value not in ("NDR400", "QM9700", "ndr400", " NDR400")   # the catalog folds case and blanks
        argv += [option, value]
    elif option == "--name":
        value = src.pick(TEXTS + ["", " ", "a" * 200, "a" * 201, "a: b # c", "- x", "&anchor", "*alias", "!!python/x"])
        refuse = not _printable_name(value)
        argv += [option, value]
    else:
        target = src.pick(sorted(TARGETS))
        value = TARGETS[target]
        force = src.pick([True, False])
        argv += [option, value] + (["--force"] if force else [])
        refuse = target != "ok"
    return Case("init", argv, {"folder/keep": b""}, f"init {option} {value[:40]!r}", refuse, ["fifo"],
                links={"loop": "{dir}/loop", "dangling": "{dir}/gone/x"})


# --- bench collective --local -------------------------------------------------------------------

def cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_case(src: Source, slow: bool) -> Case:
    """`bench collective --local N [--oversubscribe]` ending at `--out` naming a folder: a value out
    of range must be refused naming --local (`expect`), one in range must reach the --out check."""
    value = src.pick(NUMBERS + [str(cores()), str(cores() + 1), "8", "9", str(4 * cores()), str(4 * cores() + 1),
                                "1000000"])
    over = src.pick([True, False])
    high = max(8, 4 * cores()) if over else cores()
    n = int_text(value)
    ok = n is not None and 1 <= n <= high
    argv = ["bench", "collective", "--local", value, "--min", "8", "--max", "8", "--iters", "1", "--warmup", "0",
            "--timeout", "30", "--out", "{dir}/folder"] + (["--oversubscribe"] if over else [])
    return Case("local", argv, {"folder/keep": b""}, f"--local {value[:40]!r}{' --oversubscribe' if over else ''}",
                True, expect="--out" if ok else "--local")


OPTION_KINDS = {"anyopt": anyopt_case, "init": init_case, "local": local_case}
