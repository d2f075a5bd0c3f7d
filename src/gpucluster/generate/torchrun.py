"""torchrun command lines and the training script's layout arguments, consistent with a plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpucluster.errors import UserError
from gpucluster.generate.megatron import MegatronArgs, megatron_args
from gpucluster.generate.megatron_job import Checkpointing, checkpointing, job_args
from gpucluster.generate.plan_file import JobPlan
from gpucluster.generate.quoting import Expand, check_text, is_variable, sh, sh_join

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
    # How the job checkpoints (megatron style): computed from the plan and the CLI's storage
    # options; None: from the plan with the default storage assumption.
    checkpoint: Checkpointing | None = field(default=None, compare=False)

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
    """The plan's layout and model shape as Megatron-LM arguments (generate/megatron.py,
    megatron_model.py); raises UserError for a layout Megatron cannot run as planned."""
    return layout_notes(plan, style)[0]


def layout_notes(plan: JobPlan, style: str = "megatron", launch: Launch | None = None) -> tuple[list[str], list[str]]:
    """(arguments, warnings): what the program gets, and what the user should hear on stderr."""
    if style == "none":
        return [], []
    res = megatron_program(plan, launch or Launch())
    return res.args, res.warnings


def shell_var(name: str) -> str:
    return Expand(f"${name}")


def megatron_program(plan: JobPlan, launch: Launch, var: Callable[[str], str] = shell_var,
                     exit_mins: int | None = None, job: bool = False) -> MegatronArgs:
    """Layout + model shape (+ with `job`, data, tokenizer, length and checkpoints): the whole
    Megatron-LM command line, its warnings and the environment it needs."""
    from gpucluster.generate.megatron_model import model_spec, shape_args

    res = megatron_args(plan)
    spec = model_spec(plan)
    if spec is None:
        res.warnings.append(f"{plan.source}: model_spec: the plan does not describe {plan.model} (not a preset, "
                            "written before plans carried model_spec): add its shape flags with --arg")
    else:
        shape, notes = shape_args(plan, spec)
        res.args += shape
        res.warnings += notes
    if job:
        res.args += job_args(plan, spec, checkpoint_of(plan, launch), var, exit_mins)
    return res


def checkpoint_of(plan: JobPlan, launch: Launch) -> Checkpointing:
    if launch.checkpoint is not None:
        return launch.checkpoint
    from gpucluster.generate.megatron_model import model_spec

    return checkpointing(plan, model_spec(plan))


def torchrun_words(plan: JobPlan, launch: Launch, *, nnodes: str, endpoint: str, rdzv_id: str,
                   var: Callable[[str], str] = shell_var, exit_mins: int | None = None) -> list[str]:
    """`torchrun ...` as a list of words; words starting with `$` are shell expansions."""
    def word(text: str) -> str:
        return Expand(text) if "$" in text else text

    words = ["torchrun", word(f"--nnodes={nnodes}"), f"--nproc-per-node={plan.gpus_per_node}",
             "--rdzv-backend=c10d", word(f"--rdzv-endpoint={endpoint}"), word(f"--rdzv-id={rdzv_id}"),
             launch.script]
    if launch.arg_style == "megatron":
        words += megatron_program(plan, launch, var, exit_mins, job=True).args
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
                           rdzv_id="gpucluster", var=guarded_var)
    return env_prefix(plan, launch) + sh_join(words)


def guarded_var(name: str) -> str:
    """A placeholder in a lone command line: the shell refuses to run it, naming the variable
    and what it holds, until the variable is set (`${NAME:?message}`)."""
    from gpucluster.generate.megatron_job import PLACEHOLDERS

    what = dict(PLACEHOLDERS)[name]
    return Expand(f"${{{name}:?set {name}: {what}}}")


def env_prefix(plan: JobPlan, launch: Launch) -> str:
    """`NAME=VALUE ` (or `env -u NAME `) for the environment Megatron-LM needs, before a lone command."""
    if launch.arg_style != "megatron":
        return ""
    env = megatron_args(plan).env
    unset = [n for n, v in env.items() if v is None]
    return ("env " + " ".join(f"-u {n}" for n in unset) + " " if unset else "") + \
        "".join(f"{n}={sh(v)} " for n, v in env.items() if v is not None)
