"""The rule interface and the registry of rules (`gpucluster check --rule ID` names them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from gpucluster.registry import Registry

if TYPE_CHECKING:
    from gpucluster.check.context import CheckContext
    from gpucluster.check.findings import Finding


class Rule:
    """One check. Subclasses set `id` and `summary` and yield findings from `check`."""
    id: ClassVar[str]
    summary: ClassVar[str]

    def check(self, ctx: CheckContext) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError


RULES: Registry[type[Rule]] = Registry("check rule")


def rule(cls: type[Rule]) -> type[Rule]:
    """Class decorator: register a rule under its id."""
    RULES.add(cls.id, cls)
    return cls
