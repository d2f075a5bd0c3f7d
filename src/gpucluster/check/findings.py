"""A finding: what is wrong, how bad, the numbers that show it, and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["info", "warning", "error"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")
RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    title: str                       # one line: what is wrong
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)   # numbers (SI units in the key names) and their basis
    where: str | None = None         # file:line it points at

    def __post_init__(self) -> None:
        if self.severity not in RANK:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}")

    def reaches(self, level: Severity) -> bool:
        return RANK[self.severity] >= RANK[level]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "title": self.title, "where": self.where,
                "evidence": self.evidence, "fix": self.fix}


def severity_by_slowdown(slowdown: float, warn: float = 1.1, error: float = 1.5) -> Severity:
    """info below `warn`x, warning from `warn`x, error from `error`x."""
    return "error" if slowdown >= error else "warning" if slowdown >= warn else "info"
