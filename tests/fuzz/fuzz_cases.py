"""Fuzz cases: the real examples (cluster specs, scenarios, traces, job files, model and price
files) mutated with wrong types, huge/negative/NaN/inf numbers, deep nesting, aliases, binary
bytes, empty files and hostile strings in names; each with a `gpucluster` command line to run.

Shared by the in-process hypothesis tests (tests/fuzz/test_fuzz_cli.py, choices drawn by
hypothesis so that failures shrink) and the long run (benchmarks/fuzz_long.py, choices from a
seeded random.Random, each case in its own process under resource limits). The choices and
mutations are `fuzz_mutations.py`; `fuzz_oracle.classify` is the oracle both use: what a run of a
case may and may not print.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from fuzz_mutations import HOSTILE_NUMBERS, HOSTILE_STRINGS, LAST, Case, Source, mutate_data, mutate_text, to_yaml
from fuzz_oracle import Rule, _matches, invalid

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"


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
    ("best", "step_s"): Rule(0, 365 * 86400, strict=True), ("seq_len",): BIG,
    ("layers",): Rule(1, 1_000_000, integer=True, strict=True, optional=True),
    ("model",): Rule(pattern=r"[A-Za-z0-9][A-Za-z0-9 ._+(),/:-]*"),
}
PLAN_REQUIRED = [("schema",), ("model",), ("seq_len",), ("target",), ("best",), ("target", "nodes"),
                 ("best", "layout"), ("best", "step_s"),
                 *[("best", "layout", k) for k in ("tp", "pp", "dp", "micro_batch", "global_batch")]]
PLAN_COMMANDS = [["generate", "slurm", "{f}"], ["generate", "torchrun", "{f}"], ["generate", "deepspeed", "{f}"],
                 ["generate", "k8s", "{f}"]]


# Training validation cases that state every stack field (aliases, the kernel, fused kernels, expert
# imbalance, HSDP, compile), one dense and one MoE: what `validate` reads from a user's own file.
VALIDATION_CASES = [
    {"id": "dense", "kind": "training", "source": "s", "notes": "n",
     "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 16, "gpus_per_node": 8,
                  "scale_out": {"type": "infiniband", "gbps_per_nic": 400, "nics_per_node": 8}},
     "model": {"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 8, "ffn_hidden": 2816, "gated_mlp": True,
               "vocab": 32000, "seq_len": 2048},
     "training": {"global_batch": 32, "micro_batch": 2, "tp": 1, "pp": 1, "dp": 16, "cp": 1, "ep": 1,
                  "interleave": 1, "sequence_parallel": False, "recompute": "none", "zero": 3, "precision": "bf16",
                  "attention": "fa2", "framework": "fsdp2", "fused_kernels": True, "torch_compile": False,
                  "shard_group": 8, "flops_counted": "model"},
     "measured": {"tokens_per_s_per_gpu": 20000.0}},
    {"id": "moe", "kind": "training",
     "hardware": {"gpu": "B300", "gpus": 8, "gpus_per_node": 8},
     "model": {"layers": 2, "hidden": 1024, "heads": 8, "ffn_hidden": 2048, "gated_mlp": True, "vocab": 32000,
               "seq_len": 2048, "experts": 16, "experts_per_token": 2, "moe_ffn_hidden": 512},
     "training": {"global_batch": 16, "micro_batch": 1, "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 8,
                  "interleave": 1, "sequence_parallel": False, "recompute": "none", "zero": 1,
                  "framework": "megatron-core", "attention": "te", "moe_imbalance": 1.2},
     "measured": {"mfu": 0.3}},
]
VALIDATION_RULES: dict[tuple, Rule] = {
    ("cases", "*", "training", "moe_imbalance"): Rule(1, 64, optional=True),   # null: the documented default
    ("cases", "*", "training", "global_batch"): Rule(1, math.inf, integer=True),
    ("cases", "*", "training", "shard_group"): Rule(1, math.inf, integer=True),
}


def validation_case(src: Source, slow: bool) -> Case:
    """A training validation file that states the stack, mutated, predicted by `validate`."""
    data = {"schema": "gpucluster-validation/v1", "cases": VALIDATION_CASES}
    if src.pick([True, True, True, False]):
        data, note = mutate_data(src, data, [("cases", 0, "id"), ("cases", 0, "training", "framework"),
                                             ("cases", 1, "training", "attention")], focus=list(VALIDATION_RULES))
        body, refuse = to_yaml(data), must_refuse(VALIDATION_RULES)
    else:
        body, note = mutate_text(src, yaml.safe_dump(data, sort_keys=False))
        refuse = False
    cmd = src.pick([["validate", "{f}"], ["validate", "{f}", "--json"]])
    return Case("validation", [a.replace("{f}", "{dir}/v.yaml") for a in cmd], {"v.yaml": body}, note, refuse)


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


from fuzz_api_cases import ENTRY_KINDS  # noqa: E402  (it imports fuzz_mutations too)
from fuzz_option_cases import OPTION_KINDS  # noqa: E402

KINDS = {"cluster": cluster_case, "job": job_case, "model": model_case, "prices": price_case,
         "scenario": scenario_case, "trace": trace_case, "plan": plan_case, "result": result_case,
         "option": option_case, "nodes": node_list_case, "validation": validation_case, **ENTRY_KINDS, **OPTION_KINDS}
FAST_KINDS = ("cluster", "cluster", "cluster", "job", "model", "prices", "plan", "validation", "result", "option",
              "api", "api", "outpath", "timeopt", "slurm", "anyopt", "anyopt", "init", "local")


def make_case(src: Source, slow: bool = False, kinds: Sequence[str] | None = None) -> Case:
    """`slow=False`: only commands that answer in well under a second (the in-`make test` slice);
    `kinds`: only these (a look at a few kinds at scale)."""
    kind = src.pick(list(kinds) if kinds else list(KINDS) + ["cluster", "job"] if slow else list(FAST_KINDS))
    return KINDS[kind](src, slow)
