"""DeepSpeed configuration JSON: the batch keys and the line of every top-level key.

A JSON syntax error is a problem at the line the decoder stopped on. The config in
seed 2 is a Python dict with `True` (not JSON); such a file fails here with its line.

The three batch keys are checked here, where their lines are known: DeepSpeed takes a whole
number >= 1 (or "auto" through the Hugging Face integration). Anything else (0, a negative,
NaN, Infinity, 8.5, true, a list) is a problem at its line and is removed from what the rules
read, so that the batch rule never divides by a zero micro batch.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gpucluster.check.jobs.model import JobFile, Problem

BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
MAX_BATCH = 2**31 - 1       # DeepSpeed and torch keep these in int32 contexts; beyond is a typo


def parse_deepspeed(path: str, text: str) -> JobFile:
    job = JobFile(path, "deepspeed")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        job.problems.append(Problem(exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"))
        return job
    except (ValueError, RecursionError) as exc:
        # int() of more than 4,300 digits (ValueError), or [[[[...]]]] nested past the stack.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else " ".join(str(exc).split())[:120]
        job.problems.append(Problem(None, f"not a JSON document gpucluster can read: {reason}"))
        return job
    if not isinstance(data, dict):
        job.problems.append(Problem(1, "a DeepSpeed config is a JSON object"))
        return job
    job.deepspeed_lines = top_level_key_lines(text)
    for key in BATCH_KEYS:
        if key in data and (why := batch_problem(data[key])):
            job.problems.append(Problem(job.deepspeed_lines.get(key), f"{key}: {why}"))
            del data[key]
    job.deepspeed = data
    return job


def batch_problem(value: Any) -> str | None:
    """Why a batch value is not one DeepSpeed accepts, or None when it is."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_BATCH):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        got = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    else:
        got = json.dumps(value) if isinstance(value, bool | int | float | str | None) else type(value).__name__
        got = got if len(got) <= 40 else got[:37] + "..."
    return f"must be a whole number from 1 to {MAX_BATCH:,} (or \"auto\"), got {got}: DeepSpeed will not start"


def top_level_key_lines(text: str) -> dict[str, int]:
    """Line of each key of the outermost object (a small scanner: strings, escapes, nesting)."""
    lines: dict[str, int] = {}
    depth, line, i = 0, 1, 0
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == '"':
            start, j = line, i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            key = text[i + 1:j]
            k = j + 1
            while k < len(text) and text[k] in " \t\r\n":
                k += 1
            if depth == 1 and k < len(text) and text[k] == ":":
                lines.setdefault(key, start)
            i = j
        i += 1
    return lines
