"""Shell job files: Slurm batch scripts (#SBATCH), and scripts or single command lines that
launch training with srun, torchrun, deepspeed, mpirun or python -m torch.distributed.run.

What is read: #SBATCH directives (long and short forms), `export NAME=VALUE` and
`NAME=VALUE` assignments (the environment NCCL sees), and launch commands with their
options (launcher and training-script options alike, e.g. --nproc_per_node,
--save-interval). Backslash continuations are joined; a line the shell could not
split (an unclosed quote) is reported as a problem at its line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Set as AbstractSet

from gpucluster.check.jobs.model import Command, JobFile, Problem, Setting

# sbatch short options that take a value -> long name (sbatch(1))
SHORT = {"-N": "nodes", "-n": "ntasks", "-G": "gpus", "-c": "cpus-per-task", "-t": "time", "-J": "job-name",
         "-p": "partition", "-o": "output", "-e": "error", "-A": "account", "-w": "nodelist", "-x": "exclude",
         "-q": "qos", "-C": "constraint", "-D": "chdir", "-a": "array", "-d": "dependency"}
# long sbatch options that take no value (or an optional =value)
FLAGS = {"exclusive", "requeue", "no-requeue", "overcommit", "contiguous", "wait", "hold", "spread-job",
         "use-min-nodes", "parsable", "test-only", "verbose", "quiet", "exact"}
LAUNCHERS = {"srun": "srun", "torchrun": "torchrun", "deepspeed": "deepspeed", "mpirun": "mpirun",
             "mpiexec": "mpirun", "accelerate": "accelerate"}
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# shlex is superlinear in the length of a token (a 1.6 MB line took 72 s); a launch line is a
# few hundred characters, a long one a few thousand. Longer logical lines are a problem, unread.
MAX_LINE = 8192


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []                  # parts of a continued line (joined once: no quadratic +=)
    start = 0
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = i
        if raw.rstrip().endswith("\\") and not raw.lstrip().startswith("#"):
            buf.append(raw.rstrip()[:-1] + " ")
            continue
        out.append((start, "".join(buf) + raw))
        buf = []
    if buf:
        out.append((start, "".join(buf)))
    return out


def too_long(line: int, text: str, job: JobFile) -> bool:
    """A logical line over MAX_LINE characters: reported, and not split."""
    if len(text) <= MAX_LINE:
        return False
    job.problems.append(Problem(line, f"line of {len(text):,} characters (more than {MAX_LINE:,}): not read"))
    return True


def _options(tokens: list[str], line: int, flags: AbstractSet[str] = frozenset()) -> dict[str, Setting]:
    """--name=value, --name value, -X value, -Xvalue; a token not followed by a value is a flag ("")."""
    opts: dict[str, Setting] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and len(tok) > 2:
            name, eq, value = tok[2:].partition("=")
            if not eq:
                nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                if name not in flags and nxt is not None and not nxt.startswith("-"):
                    value, i = nxt, i + 1
            opts[name] = Setting(value, line)
        elif tok[:2] in SHORT and len(tok) >= 2 and tok.startswith("-") and not tok.startswith("--"):
            long = SHORT[tok[:2]]
            if len(tok) > 2:
                opts[long] = Setting(tok[2:].lstrip("="), line)
            elif i + 1 < len(tokens):
                opts[long], i = Setting(tokens[i + 1], line), i + 1
        i += 1
    return opts


def _split(text: str, line: int, job: JobFile) -> list[str] | None:
    try:
        return shlex.split(text, comments=True)
    except ValueError as exc:
        job.problems.append(Problem(line, f"cannot split the shell line: {exc}"))
        return None


def _launchers(argv: list[str]) -> list[str]:
    found = []
    for i, tok in enumerate(argv):
        base = tok.rsplit("/", 1)[-1]
        if base in LAUNCHERS:
            found.append(LAUNCHERS[base])
        elif base.startswith("python") and argv[i + 1:i + 3] in (["-m", "torch.distributed.run"],
                                                                  ["-m", "torch.distributed.launch"]):
            found.append("torchrun")
    return found


def parse_shell(path: str, text: str) -> JobFile:
    job = JobFile(path, "shell")
    for line, raw in logical_lines(text):
        stripped = raw.strip()
        if too_long(line, stripped, job):
            continue
        if stripped.startswith("#SBATCH"):
            job.kind = "sbatch"
            tokens = _split(stripped[len("#SBATCH"):], line, job)
            if tokens is None:
                continue
            if not tokens or not tokens[0].startswith("-"):
                shown = stripped if len(stripped) <= 80 else stripped[:77] + "..."
                job.problems.append(Problem(line, f"#SBATCH line without an option: {shown!r}"))
                continue
            job.directives.update(_options(tokens, line, FLAGS))
            continue
        if not stripped or stripped.startswith("#"):
            continue
        argv = _split(stripped, line, job)
        if not argv:
            continue
        if argv[0] == "export":
            argv = argv[1:]
            for tok in argv:
                m = ASSIGN.match(tok)
                if m:
                    job.env[m.group(1)] = Setting(m.group(2), line)
            continue
        while argv and ASSIGN.match(argv[0]):             # NAME=VALUE [command]
            m = ASSIGN.match(argv.pop(0))
            assert m
            job.env[m.group(1)] = Setting(m.group(2), line)
        launchers = _launchers(argv)
        if launchers:
            job.commands.append(Command(line, argv, launchers, _options(argv[1:], line, FLAGS)))
    return job
