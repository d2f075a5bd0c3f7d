"""torchrun command lines and the training script's layout arguments, consistent with a plan."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.errors import UserError
from gpucluster.generate.megatron import megatron_args
from gpucluster.generate.plan_file import JobPlan
from gpucluster.generate.quoting import Expand, check_text, is_variable, sh_join

DEFAULT_PORT = 29500
ARG_STYLES = ("megatron", "none")


@dataclass(frozen=True)
class Launch:
    """What the user says about the training program."""
    script: str = "train.py"
    script_args: tuple[str, ...] = ()
    arg_style: str = "megatron"      # append the plan's layout as Megatron-LM flags, or nothing
    deepspeed_config: str | None = None
    port: int = DEFAULT_PORT

    def __post_init__(self) -> None:
        check_text(self.script, "--script")
        for a in self.script_args:
            check_text(a, "--arg")
        if self.deepspeed_config is not None:
            check_text(self.deepspeed_config, "--deepspeed-config")
        if not 1 <= self.port <= 65535:
            raise UserError(f"must be a TCP port (1-65535), got {self.port}", field="--port")
        if self.arg_style not in ARG_STYLES:
            raise UserError(f"must be one of {', '.join(ARG_STYLES)}, got {self.arg_style!r}", field="--args")


def layout_args(plan: JobPlan, style: str = "megatron") -> list[str]:
    """The plan's layout as Megatron-LM arguments (generate/megatron.py); raises UserError for a
    layout Megatron cannot run as planned."""
    return layout_notes(plan, style)[0]


def layout_notes(plan: JobPlan, style: str = "megatron") -> tuple[list[str], list[str]]:
    """(arguments, warnings): what the program gets, and what the user should hear on stderr."""
    if style == "none":
        return [], []
    res = megatron_args(plan)
    return res.args, res.warnings


def torchrun_words(plan: JobPlan, launch: Launch, *, nnodes: str, endpoint: str, rdzv_id: str) -> list[str]:
    """`torchrun ...` as a list of words; words starting with `$` are shell expansions."""
    def word(text: str) -> str:
        return Expand(text) if "$" in text else text

    words = ["torchrun", word(f"--nnodes={nnodes}"), f"--nproc-per-node={plan.gpus_per_node}",
             "--rdzv-backend=c10d", word(f"--rdzv-endpoint={endpoint}"), word(f"--rdzv-id={rdzv_id}"),
             launch.script]
    words += layout_args(plan, launch.arg_style)
    if launch.deepspeed_config:
        words += ["--deepspeed", f"--deepspeed_config={launch.deepspeed_config}"]
    return words + list(launch.script_args)


def torchrun_command(plan: JobPlan, launch: Launch, head: str = "$MASTER_ADDR") -> str:
    """One command to run on every node (`head`: the first node's address, or a variable
    such as $MASTER_ADDR that holds it)."""
    check_text(head, "--head")
    if "$" in head and not is_variable(head):
        raise UserError(f"a host name or one shell variable ($MASTER_ADDR), got {head!r}", field="--head")
    words = torchrun_words(plan, launch, nnodes=str(plan.nodes), endpoint=f"{head}:{launch.port}",
                           rdzv_id="gpucluster")
    return sh_join(words)
