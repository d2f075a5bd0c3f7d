"""What the parsers extract from job files, with the line of every value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Setting:
    value: str
    line: int | None


@dataclass
class Command:
    """One launch command line (srun, torchrun, deepspeed, mpirun, python), options by name."""
    line: int
    argv: list[str]
    launchers: list[str]                       # e.g. ["srun", "torchrun"]
    options: dict[str, Setting] = field(default_factory=dict)   # --name -> value ("" for flags)

    def option(self, *names: str) -> Setting | None:
        for n in names:
            for variant in (n, n.replace("_", "-"), n.replace("-", "_")):
                if variant in self.options:
                    return self.options[variant]
        return None


@dataclass(frozen=True)
class Problem:
    line: int | None
    reason: str


@dataclass
class K8sWorkload:
    kind: str
    name: str
    line: int
    gpus_per_pod: Setting | None
    pods: Setting | None                       # replicas / parallelism (workers for PyTorchJob)
    nproc_per_node: Setting | None = None


@dataclass
class JobFile:
    path: str
    kind: str                                  # sbatch | shell | deepspeed | kubernetes | nccl-env
    env: dict[str, Setting] = field(default_factory=dict)
    directives: dict[str, Setting] = field(default_factory=dict)   # #SBATCH options by long name
    commands: list[Command] = field(default_factory=list)
    deepspeed: dict[str, Any] | None = None
    deepspeed_lines: dict[str, int] = field(default_factory=dict)
    workloads: list[K8sWorkload] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def at(self, line: int | None) -> str:
        return f"{self.path}:{line}" if line else self.path
