"""Slurm hostlist expressions: `gpu[01-16]`, `gpu[01-04,09],login1`, `rack[1-2]-n[1-4]`.

Slurm's rules (slurm.conf(5), "NodeName"; `scontrol show hostnames`): items are separated
by commas outside brackets; each bracket holds numbers and ranges `lo-hi` separated by commas;
a range keeps the zero padding of its low bound (`[08-10]` is 08, 09, 10); several bracket
groups in one item expand as their product, leftmost slowest. Written here rather than taken
from PyPI: the one maintained library (python-hostlist) is GPL-2.0+, which this Apache-2.0
package cannot depend on.
"""

from __future__ import annotations

import re

MAX_HOSTS = 1_000_000   # an expression naming more is refused: no real cluster has that many nodes
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")   # what one host name (or the text between brackets) may hold
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAIL = re.compile(r"^(.*?)(\d+)$")


def _split_top(expr: str) -> list[str]:
    """Comma-separated items, commas inside brackets kept."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested brackets in {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"']' without '[' in {expr!r}")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"'[' without ']' in {expr!r}")
    items.append("".join(cur))
    return items


def _numbers(body: str, item: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise ValueError(f"{part.strip()!r} in {item!r} is not a number or a range lo-hi")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"range {part.strip()!r} in {item!r} runs backwards")
        if hi - lo + 1 > MAX_HOSTS:
            raise ValueError(f"range {part.strip()!r} in {item!r} names more than {MAX_HOSTS:,} hosts")
        width = len(lo_s)
        out += [str(n).zfill(width) for n in range(lo, hi + 1)]
    return out


def _item(item: str) -> list[str]:
    names = [""]
    pos = 0
    for m in re.finditer(r"\[([^\]]*)\]", item):
        text = item[pos:m.start()]
        if text and not _NAME.match(text):
            raise ValueError(f"{text!r} in {item!r} is not a host name")
        nums = _numbers(m.group(1), item)
        if len(names) * len(nums) > MAX_HOSTS:
            raise ValueError(f"{item!r} names more than {MAX_HOSTS:,} hosts")
        names = [n + text + x for n in names for x in nums]
        pos = m.end()
    rest = item[pos:]
    if rest and not _NAME.match(rest):
        raise ValueError(f"{rest!r} in {item!r} is not a host name")
    return [n + rest for n in names]


def expand(expr: str) -> list[str]:
    """The host names of an expression, in its order, each once (a repeat is dropped, as Slurm does).
    Raises ValueError with the reason on anything that is not a hostlist."""
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("an empty hostlist")
    out: dict[str, None] = {}
    for raw in _split_top(expr.strip()):
        item = raw.strip()
        if not item:
            raise ValueError(f"an empty item in {expr!r}")
        for name in _item(item):
            out[name] = None
        if len(out) > MAX_HOSTS:
            raise ValueError(f"{expr!r} names more than {MAX_HOSTS:,} hosts")
    return list(out)


def compress(names: list[str]) -> str:
    """The shortest usual expression for names: runs of one prefix and number width become
    `prefix[a-b,c]`, in the order the prefixes first appear (`expand(compress(x))` is x when x is
    sorted within each prefix)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: dict[str, None] = {}
    order: list[tuple[str, int] | str] = []
    for n in names:
        m = _TAIL.match(n)
        if m is None:
            if n not in plain:
                plain[n] = None
                order.append(n)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    out = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        prefix, width = item
        key = item
        nums = sorted(set(groups[key]))
        if len(nums) == 1:
            out.append(prefix + str(nums[0]).zfill(width))
            continue
        runs, lo, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            runs.append(str(lo).zfill(width) if lo == prev else f"{str(lo).zfill(width)}-{str(prev).zfill(width)}")
            if x is not None:
                lo = prev = x
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)
