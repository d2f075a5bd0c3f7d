"""DeepSpeed configuration JSON: the batch keys and the line of every top-level key.

A JSON syntax error is a problem at the line the decoder stopped on. The config in
seed 2 is a Python dict with `True` (not JSON); such a file fails here with its line.
"""

from __future__ import annotations

import json

from gpucluster.check.jobs.model import JobFile, Problem


def parse_deepspeed(path: str, text: str) -> JobFile:
    job = JobFile(path, "deepspeed")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        job.problems.append(Problem(exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"))
        return job
    if not isinstance(data, dict):
        job.problems.append(Problem(1, "a DeepSpeed config is a JSON object"))
        return job
    job.deepspeed = data
    job.deepspeed_lines = top_level_key_lines(text)
    return job


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
