"""Fuzz cases for the entry points the file mutations do not reach (issue 23 item 10):

- `api`: a public API function (gpucluster.plan_train, plan_serve, simulate, check, validate,
  load_cluster, load_model, document_model) with one argument replaced by a hostile value or type;
  any exception but UserError is a traceback, and a value this table knows is invalid taken
  without one is a wrong accept. The table is the fuzzer's own (independent of api_args.py).
- `slurm`: `gpucluster slurm status|submit|import` with stub sbatch/squeue/sacct/scontrol on PATH
  printing invalid UTF-8, blank or huge fields, deep or odd JSON, endless output; job output files
  that are binary, a FIFO, /dev/zero or a foreign bench document.
- `outpath`: every writer (-o, --html, --metrics, --events, --scenario) aimed at a loop of links,
  a FIFO, a folder, a missing folder or a 300-character name (never outside the case folder).
- `timeopt`: time and count options (--poll, --wait, --timeout, --iters, --block, --workers, --seed)
  with non-finite, huge, negative, zero and wrong-type values.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from fuzz_mutations import HOSTILE_NUMBERS, HOSTILE_STRINGS, WRONG_TYPES, Case, Source

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "h200-256-ndr400.yaml")
TINY_SCENARIO = f"""name: tiny
cluster: {CLUSTER}
horizon_days: 0.2
workloads:
  - kind: batch
    name: b
    arrivals: {{process: once, count: 3}}
    tasks: 1
    task_hours: 1
""".encode()
VALIDATION = b"""schema: gpucluster-validation/v1
cases:
  - id: c1
    kind: collective
    hardware: {gpu: H100-SXM5-80GB, gpus: 8, gpus_per_node: 8}
    collective: {op: all_reduce, bytes: 1048576, gpus: 8, gpus_per_node: 8}
    measured: {busbw_gbps: 43.7}
"""

# The fuzzer's own view of each parameter: what a value must be (independent of api_args.py).
COUNT, SEED, FLAG, OFLAG, TEXT, OTEXT, PATH, OPATH, FUNC, GBPS, DURATION, RATE, LIST, ANY = (
    "count", "seed", "flag", "optional-flag", "text", "optional-text", "path", "optional-path", "function",
    "gbps", "duration", "rate", "list", "any")
API: dict[str, tuple[tuple, dict[str, Any], dict[str, str]]] = {
    # function: (positional baseline, keyword baseline, parameter -> kind)
    "plan_train": (("llama2-7b",), {"gpu": "H100:8", "tokens": "1B", "top": 1},
                   {"model": TEXT, "nodes": COUNT, "top": COUNT, "global_batch": COUNT, "seq_len": COUNT,
                    "nics_per_node": COUNT, "tp_across_domains": FLAG, "dp_overlap": OFLAG, "tp_overlap": OFLAG,
                    "gpu": OTEXT, "precision": TEXT, "tokens": ANY, "layout": ANY, "attention": OTEXT,
                    "cluster": OPATH, "pool": OTEXT, "nic": TEXT, "moe_overlap": OTEXT, "framework": OTEXT,
                    "shard_group": COUNT, "failure_profile": TEXT, "checkpoint_interval": DURATION,
                    # non-negative finite numbers (their exact ranges are the API's: refusing more is no defect)
                    "checkpoint_write_gbps": GBPS, "restart_s": GBPS}),
    "plan_serve": (("llama2-7b", 5), {"gpu": "H100:8"},
                   {"max_batch": COUNT, "input_tokens": COUNT, "output_tokens": COUNT, "nodes": COUNT,
                    "rate": RATE, "slo_ttft": DURATION, "slo_tpot": DURATION, "compare": ANY, "gpu": OTEXT,
                    "simulate": FLAG, "lengths": TEXT, "precision": TEXT, "model": ANY, "cluster": OPATH,
                    "pool": OTEXT, "nic": TEXT, "kv_precision": OTEXT, "cpu": OTEXT, "engine": OTEXT}),
    "simulate": (("{dir}/s.yaml",), {}, {"seed": SEED, "events": FUNC, "on_progress": FUNC, "on_start": FUNC,
                                        "policy": OTEXT, "scenario": ANY, "policy_field": TEXT}),
    "check": ((CLUSTER,), {}, {"profile": TEXT, "input_gbps_per_gpu": GBPS, "checkpoint_interval": DURATION,
                               "jobs": LIST, "rules": LIST, "fail_on": TEXT, "pool": OTEXT, "cluster": PATH,
                               "model": OTEXT, "interfaces": ANY, "checkpoint_tier": OTEXT}),
    "validate": (("{dir}/v.yaml",), {}, {"path": PATH}),
    "load_cluster": ((CLUSTER,), {}, {"path": PATH}),
    "load_model": (("llama2-7b",), {}, {"name_or_path": TEXT}),
    "document_model": (("cost",), {}, {"name": TEXT}),
}
POSITIONAL = {"plan_train": ("model",), "plan_serve": ("model", "rate"), "simulate": ("scenario",),
              "check": ("cluster",), "validate": ("path",), "load_cluster": ("path",),
              "load_model": ("name_or_path",), "document_model": ("name",)}


class Loud:
    """An object whose repr is 100 kB: an error must not quote it whole."""

    def __repr__(self) -> str:
        return "L" * 100_000


def _values() -> list[Any]:
    return [*HOSTILE_NUMBERS, *WRONG_TYPES, b"bytes", Path("{dir}/nope.yaml"), Loud(), (lambda *a, **k: None),
            object(), "/dev/zero", "{dir}/fifo", "{dir}", *HOSTILE_STRINGS[::3]]


def wrong(kind: str, value: Any, required: bool) -> bool:
    """True: `value` is known to be wrong for a parameter of this kind (exit 0 is a wrong accept)."""
    if value is None:
        return required and kind not in (OFLAG, OTEXT, OPATH, FUNC, DURATION, GBPS, LIST, ANY, COUNT, SEED)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (COUNT, SEED):
        if not isinstance(value, int) or isinstance(value, bool):
            return True
        return value < (0 if kind == SEED else 1) or (value > 10**9 and kind == COUNT) or value >= 2**64
    if kind in (FLAG, OFLAG):
        return not isinstance(value, bool)
    if kind in (TEXT, OTEXT):
        return not isinstance(value, str)
    if kind in (PATH, OPATH):
        return not isinstance(value, (str, os.PathLike))
    if kind == FUNC:
        return not callable(value)
    if kind == GBPS:
        return not number or not math.isfinite(value) or value < 0 or value > 1e9
    if kind in (DURATION, RATE):
        if isinstance(value, str):
            return False                       # text: the parser decides
        return not number or not math.isfinite(value) or value <= 0 or (kind == RATE and value > 1e9)
    if kind == LIST:
        return not isinstance(value, (list, tuple)) or any(not isinstance(v, str) for v in value)
    return False


def api_case(src: Source, slow: bool) -> Case:
    name = src.pick([n for n in API if slow or n not in ("simulate", "plan_serve")])
    args, kwargs, kinds = API[name]
    param = src.pick(sorted(kinds))
    value = src.pick(_values())
    call_args, call_kwargs = list(args), dict(kwargs)
    if param in POSITIONAL[name]:
        call_args[POSITIONAL[name].index(param)] = value
    else:
        call_kwargs[param] = value
    refuse = wrong(kinds[param], value, param in POSITIONAL[name])
    files = {"s.yaml": TINY_SCENARIO, "v.yaml": VALIDATION}
    return Case("api", [], files, f"{name}({param}={_short(value)})", refuse, ["fifo"],
                call={"function": name, "args": call_args, "kwargs": call_kwargs})


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, Loud) else "Loud()"
    return text[:40]


def _in_folder(value: Any, folder: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{dir}", str(folder))
    if isinstance(value, Path):
        return Path(str(value).replace("{dir}", str(folder)))
    return value


def run_call(call: dict[str, Any], folder: Path) -> int:
    """Run an API case: 0 when it returns (and its `.document()`, if any, builds), 2 and one line on
    stderr for a UserError, 1 and a traceback for anything else."""
    import sys
    import traceback

    import gpucluster

    fn = getattr(gpucluster, call["function"])
    args = [_in_folder(a, folder) for a in call["args"]]
    kwargs = {k: _in_folder(v, folder) for k, v in call["kwargs"].items()}
    try:
        result = fn(*args, **kwargs)
        document = getattr(result, "document", None)
        if callable(document):
            document()                        # plan_serve(nodes=1.5) was accepted, then failed here
    except gpucluster.UserError as exc:
        from gpucluster.cli.app import clip
        from gpucluster.cli.safe_text import one_line
        print(f"error: {clip(one_line(exc.message))}", file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        return 1
    return 0


# --- external programs ------------------------------------------------------------------------

STUB_OUTPUTS: list[bytes | str] = [
    b"", b"\xff\xfe\x00garbage", b"\n\n\n", b"{}", b'{"jobs": []}', b'{"jobs": "x"}', b"[" * 50_000,
    b'{"jobs": [{"job_id": 5, "job_state": " "}]}', b'{"jobs": [{"job_id": 5, "job_state": []}]}',
    b'{"jobs": [{"job_id": 5, "job_state": "COMPLETED", "exit_code": 1e999, "standard_output": "{dir}/out"}]}',
    b'{"jobs": [{"job_id": 5, "job_state": "RUNNING", "name": "' + b"n" * 200_000 + b'"}]}',
    b'{"jobs": [{"job_id": 1' + b"0" * 5000 + b'}]}',
    b'{"jobs": [{"job_id": 5, "job_state": {"current": ["FAILED"]}, "exit_code": {"status": "SIGNALED", '
    b'"signal": {"signal_id": 9}}, "standard_output": "/dev/zero"}]}',
    b'{"jobs": [{"job_id": 5, "job_state": "COMPLETED", "exit_code": 0, "standard_output": "{dir}/fifo"}]}',
    b"5|n\xff|COMPLETED|0:0|node[1-2]|None\n", b"5|||||\n", b"5|x|\t|99999999999999999999:0|n|r\n",
    b"JobId=5 JobName=\xc3( UserId=x JobState= ExitCode=0:" + b"9" * 300 + b" StdOut={dir}/out\n",
    b"JobId=5 JobName=a UserId=x JobState=COMPLETED ExitCode=0:0 StdOut=%N-%j.out\n",
    b"JobID|JobName|Submit|State|AllocTRES\n1|\xff|2024-01-01T00:00:00|COMPLETED|gres/gpu=" + b"9" * 400 + b"\n",
    b"JobID|Submit|State\n" + b"|" * 10_000 + b"\n", b"Submitted batch job 5\n", b"5;cluster\n", b"9" * 100 + b"\n",
    "!yes", "!sleep",
]
JOB_OUTPUTS: list[bytes] = [
    b"", b"\xff\xfe" * 1000, b'{"schema": "gpucluster-bench-collective/v1"}\n',
    b'{"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "world_size": 2, "rows": [{"size_bytes": 8, '
    b'"time_us": 1, "algbw_gbps": 1, "busbw_gbps": 1}]}\n',
    b'{"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "world_size": 2, "avg_busbw_gbps": NaN, '
    b'"rows": []}\n', b"{" * 10_000, b"x" * 300_000,
]
# Every command with a short --timeout: a stub that never answers costs 2 s, not Slurm's 30.
SLURM_COMMANDS = [
    ["slurm", "status", "5", "--timeout", "2"], ["slurm", "status", "5", "--json", "--timeout", "2"],
    ["slurm", "import", "-o", "t.txt", "--timeout", "2"], ["slurm", "import", "-o", "t.txt", "--json", "--timeout", "2"],
    ["slurm", "import", "-o", "t.txt", "--scenario", "s.yaml", "--cluster", CLUSTER, "--partitions", "live",
     "--timeout", "2"],
    ["slurm", "import", "-o", "t.txt", "--scenario", "s.yaml", "--cluster", CLUSTER, "--partitions", "p.txt",
     "--timeout", "2"],
    ["slurm", "submit", "job.sbatch", "--poll", "0.2", "--wait", "2", "--timeout", "2"],
    ["slurm", "submit", "job.sbatch", "--poll", "0.2", "--wait", "2", "--timeout", "2", "--json"],
    ["slurm", "bench", "--poll", "0.2", "--wait", "2", "--timeout", "2", "--out-dir", "{dir}"],
]
PROGRAMS = ("sbatch", "squeue", "sacct", "scontrol")


def slurm_case(src: Source, slow: bool) -> Case:
    files: dict[str, bytes] = {"job.sbatch": b"#!/bin/bash\necho hi\n", "out": src.pick(JOB_OUTPUTS),
                               "p.txt": src.pick([b"", b"PartitionName=gpu Nodes=n[1-2] PriorityTier=\xff\n",
                                                  b"\xff" * 5000])}
    notes = []
    for prog in PROGRAMS:
        out = src.pick(STUB_OUTPUTS + [None, None])   # None: prints nothing, exit 1 (the job is unknown)
        code = src.pick([0, 0, 0, 1, 2])
        if out == "!yes":
            script = "#!/bin/sh\nexec yes 'JobID|Submit|State|xxxxxxxxxxxxxxxxxxxxxxxx'\n"
        elif out == "!sleep":
            script = "#!/bin/sh\nexec sleep 30\n"
        elif out is None:
            script = "#!/bin/sh\necho 'error: invalid job id \xff' >&2\nexit 1\n"
        else:
            files[f"bin/{prog}.out"] = out if isinstance(out, bytes) else out.encode()
            script = f"#!/bin/sh\ncat '{{dir}}/bin/{prog}.out'\nexit {code}\n"
        files[f"bin/{prog}"] = script.encode("utf-8", "surrogateescape")
        notes.append(f"{prog}={_short(out)}")
    argv = src.pick(SLURM_COMMANDS)
    return Case("slurm", argv, files, "; ".join(notes)[:200], False, ["fifo"], env={"PATH": "{dir}/bin:$PATH"},
                executables=[f"bin/{p}" for p in PROGRAMS])


# --- output paths -----------------------------------------------------------------------------

TARGETS = {"loop": "{dir}/loop", "fifo": "{dir}/fifo", "folder": "{dir}/folder", "missing": "{dir}/no/such/x",
           "long": "{dir}/" + "a" * 300, "dangling": "{dir}/dangling", "ok": "{dir}/ok.out"}
WRITERS = [
    ["plan", "train", "--model", "llama2-7b", "--gpu", "H100:8", "--tokens", "1B", "--top", "1", "--html", "{t}"],
    ["metrics", "{dir}/storage.json", "-o", "{t}"],
    ["bench", "storage", "{dir}", "--size", "64K", "--block", "16K", "--metrics", "{t}"],
    ["sweep", "{dir}/sweep.yaml", "--workers", "1", "-o", "{t}"],
    ["simulate", "{dir}/s.yaml", "--events", "{t}"],
    ["generate", "slurm", "{dir}/nope.json", "-o", "{t}"],
]
SWEEP = b"name: s\ncommand: [check]\nargs: [" + CLUSTER.encode() + b"]\ngrid: {fail_on: [error]}\n"
STORAGE = json.dumps({"schema": "gpucluster-bench-storage/v1", "path": "/x", "write_gbps": 1.0, "read_gbps": 2.0,
                      "size_bytes": 1, "block_bytes": 1, "write_s": 1, "read_s": 1,
                      "read_maybe_cached": False}).encode()


def outpath_case(src: Source, slow: bool) -> Case:
    target = src.pick(sorted(TARGETS))
    argv = [a.replace("{t}", TARGETS[target]) for a in src.pick(WRITERS)]
    return Case("outpath", argv, {"s.yaml": TINY_SCENARIO, "sweep.yaml": SWEEP, "storage.json": STORAGE,
                                  "folder/keep": b""}, f"{argv[0]} -> {target}", False, ["fifo"],
                links={"loop": "{dir}/loop", "dangling": "{dir}/gone/x"})


# --- time and count options -------------------------------------------------------------------

TIME_VALUES = ["nan", "NaN", "inf", "-inf", "1e9", "1e308", "-1", "0", "-0", "0.0", "1e-300", "abc", "", "1e999",
               "9223372036854775808", "0.5", "2"]
TIME_TEMPLATES: list[tuple[list[str], tuple[float, float] | None]] = [
    (["slurm", "submit", "job.sbatch", "--poll", "{v}", "--wait", "0.5", "--timeout", "1"], (0, 3600)),
    (["slurm", "submit", "job.sbatch", "--wait", "{v}", "--poll", "0.05", "--timeout", "1"], (0, 30 * 86400)),
    (["slurm", "status", "5", "--timeout", "{v}"], (0, 3600)),
    (["slurm", "bench", "--iters", "{v}", "--wait", "0.5", "--timeout", "1"], (1, 1_000_000)),
    (["bench", "storage", "{dir}", "--size", "4K", "--block", "{v}"], None),
    (["sweep", "{dir}/sweep.yaml", "--workers", "{v}"], (1, 1024)),
    (["simulate", "{dir}/s.yaml", "--seed", "{v}"], (0, 2**64 - 1)),
]


def time_option_case(src: Source, slow: bool) -> Case:
    argv, bounds = src.pick(TIME_TEMPLATES)
    value = src.pick(TIME_VALUES)
    refuse = False
    if bounds is not None:
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        lo, hi = bounds
        integer = "--iters" in argv or "--workers" in argv or "--seed" in argv
        refuse = not (math.isfinite(x) and (x > lo if lo == 0 and not integer else x >= lo) and x <= hi
                      and (not integer or x.is_integer()))
    files = {"job.sbatch": b"#!/bin/bash\necho hi\n", "s.yaml": TINY_SCENARIO, "sweep.yaml": SWEEP,
             "bin/sbatch": b"#!/bin/sh\necho 5\n", "bin/squeue": b"#!/bin/sh\nexit 1\n",
             "bin/sacct": b"#!/bin/sh\nexit 1\n", "bin/scontrol": b"#!/bin/sh\nexit 1\n"}
    return Case("timeopt", [a.replace("{v}", value) for a in argv], files, f"{argv[1]} {value!r}", refuse,
                env={"PATH": "{dir}/bin:$PATH"}, executables=["bin/sbatch", "bin/squeue", "bin/sacct", "bin/scontrol"])


ENTRY_KINDS = {"api": api_case, "slurm": slurm_case, "outpath": outpath_case, "timeopt": time_option_case}
