"""Docs that cannot drift: read the commands, snippets and quoted outputs of the README, the
tutorial and docs/api.md, run them, and compare every quoted number with the real output.

Shared by tests/docs/test_docs.py (which asserts) and tests/docs/refresh_docs.py (which rewrites
the quoted output blocks from real runs).

What a doc may contain, and what is checked:

- ```sh blocks: every `gpucluster ...` command (with `\\` continuations, `# comments`, `&&`,
  and `> FILE` redirection) runs in-process (typer's CliRunner) and must exit 0 or 1 (1: findings,
  as `check` and `diagnose` exit when they find something). `mkdir -p` runs too; the lines that set
  up the environment (`make`, `. .venv/bin/activate`, `pip`), need a real engine (`srun`, Slurm, the
  torch workers of `bench collective`, Ray) or carry a placeholder (`...`) are skipped, each with
  its reason (SKIPS).
- ```console blocks: `$ gpucluster ...` lines, each followed by an excerpt of what it prints.
  Every excerpt line must appear in the real output, in order, with the same words and every
  number within TOLERANCE (a line of `...` elides). Excerpts may cut a line short on either side.
- Prose numbers: in a section (heading to heading) that has a console block, every number the
  prose quotes (outside inline code, links and the seeds' quoted lines) must be one of the numbers
  its commands printed, within TOLERANCE, unless listed in NOT_OUTPUT with its reason.
- ```python blocks run in one namespace per section (after `import gpucluster`) from a folder
  where `examples/` and `validation/` are the repository's. A line `EXPR  # => VALUE` also
  compares the numbers of `repr(EXPR)` with those of VALUE, within TOLERANCE.

Commands run from a scratch folder that links `examples/`, `validation/` and `../shared` to the
real ones, so files they write (`reports/`, `cluster.yaml`, `plan.json`) never land in the tree.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("GPUCLUSTER_SHARED", ROOT.parent / "shared"))
DOCS = ("README.md", "docs/tutorial.md", "docs/api.md")

# A quoted number q matches a printed number r when |q - r| <= max(half a unit in q's last digit,
# 0.5% of |r|): "17.9" matches 17.86-17.95, "1,158" matches 1,152-1,164, "44%" matches 43.5-44.5.
REL_TOL = 0.005

NUM = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.])-?\d+(?:\.\d+)?(?![\d])|(?<=[a-zA-Z=_])\d+(?:\.\d+)?")
BOX = re.compile(r"[│┃┆┊║|─━═┄┈┼╇╈╋┏┓┗┛┡┩┢┪┣┫┳┻┯┷┠┨╭╮╰╯╞╡╪├┤┬┴┌┐└┘]")
ELIDE = {"...", "…", "[...]"}

# Lines of a ```sh block that are not run, by their first word (or a pattern), with the reason.
SKIPS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^make\b"), "sets up the environment this test runs in"),
    (re.compile(r"^\.\s"), "activates the virtual environment this test runs in"),
    (re.compile(r"^pip\b"), "installs extras (make test does)"),
    (re.compile(r"^srun\b"), "needs a real Slurm cluster with GPUs"),
    (re.compile(r"\.\.\."), "a placeholder (...) the reader fills in"),
    (re.compile(r"^gpucluster slurm (submit|status|import)\b"), "needs a real Slurm controller (tests/integration cover it)"),
    (re.compile(r"--ray\b"), "needs a Ray cluster"),
]
# Commands run only by the integration tier (subprocesses, engines), by their first words.
INTEGRATION = (("gpucluster", "bench"), ("gpucluster", "sweep"))

# Numbers in prose that are inputs or citations rather than output, with the reason.
NOT_OUTPUT: dict[tuple[str, str], str] = {
    ("docs/tutorial.md", "18"): "the seed's break-even claim (18 months), quoted to contrast with the tool's",
}


@dataclass
class Block:
    doc: str
    line: int                    # 1-based line of the opening fence
    lang: str
    lines: list[str]


@dataclass
class Section:
    doc: str
    title: str
    line: int
    blocks: list[Block] = field(default_factory=list)
    prose: list[tuple[int, str]] = field(default_factory=list)     # (line, text) outside blocks

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}:{re.sub(r'[^a-z0-9]+', '-', self.title.lower()).strip('-')[:40]}"


def sections(doc: str) -> list[Section]:
    text = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    out = [Section(doc, "(top)", 1)]
    i = 0
    while i < len(text):
        line = text[i]
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            j = i + 1
            while j < len(text) and not text[j].startswith("```"):
                j += 1
            out[-1].blocks.append(Block(doc, i + 1, fence.group(1), text[i + 1:j]))
            i = j + 1
            continue
        if re.match(r"^#{1,6} ", line):
            out.append(Section(doc, line.lstrip("#").strip(), i + 1))
        else:
            out[-1].prose.append((i + 1, line))
        i += 1
    return [s for s in out if s.blocks or any(t.strip() for _, t in s.prose)]


# ---- commands ---------------------------------------------------------------------------------

def logical_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(offset, line) with `\\` continuations joined and `# comments` dropped."""
    buf, start = "", 0
    for k, raw in enumerate(lines):
        if not buf:
            start = k
        s = raw.rstrip()
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        code = _strip_comment(buf).strip()
        buf = ""
        if code:
            yield start, code


def _strip_comment(line: str) -> str:
    """`line` up to its first ` #` outside quotes."""
    quote = ""
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k]
    return line


def written_files(cmd: str) -> list[str]:
    """The files a command line writes: `-o FILE`, `--output FILE`, `> FILE`."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return []
    return [words[k + 1] for k, w in enumerate(words[:-1]) if w in ("-o", "--output", ">")]


def skip_reason(cmd: str) -> str | None:
    """Why this line is not run at all (None: it is)."""
    for pattern, reason in SKIPS:
        if pattern.search(cmd):
            return reason
    first = cmd.split()[0]
    if first not in ("gpucluster", "mkdir") and not (first == "python" and "benchmarks/" in cmd):
        return f"not a gpucluster command ({first})"
    return None


IN_PROCESS, INTEGRATION_TIER = "in-process", "integration"


def commands(section: Section) -> Iterator[tuple[Block, int, str, str]]:
    """(block, line offset, command, tier) for every line of the section's ```sh and ```console
    blocks, in order. The tier is IN_PROCESS, INTEGRATION_TIER (subprocesses, engines: run by the
    integration test), or the reason the line is not run. A line that reads a file an earlier
    line writes follows that line: to the integration tier, or skipped."""
    writers: dict[str, dict[str, str]] = {}         # file -> {tier: command}
    for block in section.blocks:
        if block.lang == "sh":
            lines = list(logical_lines(block.lines))
        elif block.lang == "console":
            lines = [(0, q.cmd) for q in quotes(block)]
        else:
            continue
        for offset, cmd in lines:
            tier = skip_reason(cmd) or (INTEGRATION_TIER if is_integration(cmd) else IN_PROCESS)
            if tier == IN_PROCESS:
                words = shlex.split(cmd)
                for name, by in writers.items():
                    if name in words and IN_PROCESS not in by:
                        tier = INTEGRATION_TIER if INTEGRATION_TIER in by else \
                            f"reads {name}, which the skipped `{next(iter(by.values()))[:60]}` writes"
            for name in written_files(cmd):
                writers.setdefault(name, {})[tier if tier in (IN_PROCESS, INTEGRATION_TIER) else "skip"] = cmd
            yield block, offset, cmd, tier


def is_integration(cmd: str) -> bool:
    """Run only by the integration tier: commands that start processes or engines (the torch
    workers of `bench collective`, a sweep's worker pool) and the benchmark scripts (tens of
    seconds of CPU)."""
    words = tuple(cmd.split()[:2])
    return words in INTEGRATION or (words[:1] == ("python",) and "benchmarks/" in cmd)


@dataclass
class Run:
    cmd: str
    exit_code: int
    output: str


def workdir(tmp: Path, section: Section | None = None) -> Path:
    """A scratch folder that sees the repository's examples and validation, and ../shared; with
    the folders the doc's earlier sections make (`mkdir -p reports` in the set-up) made."""
    work = tmp / "repo"
    work.mkdir(parents=True, exist_ok=True)
    for name in ("examples", "validation", "benchmarks"):
        if not (work / name).exists():
            (work / name).symlink_to(ROOT / name)
    if SHARED.is_dir() and not (tmp / "shared").exists():
        (tmp / "shared").symlink_to(SHARED)
    for earlier in sections(section.doc) if section else []:
        if section is None or earlier.line >= section.line:
            break
        for _, _, cmd, _ in commands(earlier):
            if cmd.startswith("mkdir "):
                run_command(cmd, work)
    return work


def run_command(cmd: str, cwd: Path) -> list[Run]:
    """Run one shell line (`a && b`, `> file`) in-process; the runs in order."""
    runs = []
    for part in re.split(r"\s&&\s", cmd):
        words = shlex.split(part)
        out_file = None
        if ">" in words:
            k = words.index(">")
            out_file, words = words[k + 1], words[:k]
        if words[0] == "mkdir":
            for d in words[1:]:
                if not d.startswith("-"):
                    (cwd / d).mkdir(parents=True, exist_ok=True)
            runs.append(Run(part, 0, ""))
            continue
        code, stdout, output = invoke(words[1:], cwd)
        if out_file:
            (cwd / out_file).write_text(stdout)
        runs.append(Run(part, code, output))
        if code not in (0, 1):
            break
    return runs


def invoke(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """The CLI in-process, 160 columns wide (what a pipe gets), no colour: (exit code, stdout,
    stdout and stderr as a user sees them)."""
    from typer.testing import CliRunner

    from gpucluster.cli.app import app
    from gpucluster.errors import UserError
    from gpucluster.report import terminal

    old_cwd, widths = Path.cwd(), (terminal.console.width, terminal.err_console.width)
    os.chdir(cwd)
    terminal.console.width = terminal.err_console.width = 160
    try:
        res = CliRunner().invoke(app, args, catch_exceptions=False, env={"NO_COLOR": "1"})
    except UserError as exc:            # what the console script prints (cli/app.py main)
        return 2, "", f"error: {exc.message}"
    finally:
        os.chdir(old_cwd)
        terminal.console.width, terminal.err_console.width = widths
    return res.exit_code, res.stdout, res.output


# ---- console blocks ---------------------------------------------------------------------------

@dataclass
class Quote:
    """One `$ command` of a console block and the output lines quoted after it."""
    block: Block
    cmd: str
    lines: list[tuple[int, str]]          # (index in block.lines, text)


def quotes(block: Block) -> list[Quote]:
    out: list[Quote] = []
    k = 0
    while k < len(block.lines):
        line = block.lines[k]
        if line.startswith("$ "):
            cmd = line[2:].rstrip()
            while cmd.endswith("\\") and k + 1 < len(block.lines):
                k += 1
                cmd = cmd[:-1] + " " + block.lines[k].strip()
            out.append(Quote(block, _strip_comment(cmd).strip(), []))
        elif out:
            out[-1].lines.append((k, line))
        k += 1
    return out


def numbers(text: str) -> list[tuple[float, int]]:
    """The numbers in `text` with their decimals: "1,158" -> (1158.0, 0), "17.9" -> (17.9, 1)."""
    found = []
    for m in NUM.finditer(text):
        s = m.group(0).replace(",", "")
        found.append((float(s), len(s.split(".")[1]) if "." in s else 0))
    return found


def close(quoted: tuple[float, int], printed: float) -> bool:
    q, decimals = quoted
    return abs(q - printed) <= max(0.5 * 10 ** -decimals, REL_TOL * abs(printed)) + 1e-12


def _shape(text: str) -> str:
    return NUM.sub("#", " ".join(BOX.sub(" ", text).split()))


def _tokens(text: str) -> list[str]:
    return BOX.sub(" ", text).split()


def match_line(quoted: str, printed: str) -> bool | None:
    """None: different words; False: same words, a number out of tolerance; True: a match.
    The quoted line may be cut short at either end (a contiguous run of the printed tokens)."""
    q, p = _tokens(quoted), _tokens(printed)
    if not q:
        return None
    qs = [_shape(t) for t in q]
    ps = [_shape(t) for t in p]
    best: bool | None = None
    for start in range(len(p) - len(q) + 1):
        if ps[start:start + len(q)] != qs:
            continue
        window = " ".join(p[start:start + len(q)])
        qn, pn = numbers(" ".join(q)), numbers(window)
        ok = len(qn) == len(pn) and all(close(a, b) for a, (b, _) in zip(qn, pn, strict=True))
        if ok:
            return True
        best = False
    return best


def find_quoted(quote_lines: list[tuple[int, str]], output: str) -> list[tuple[int, str, str | None, str]]:
    """Each quoted line against the output, in order: (index, quoted, printed line or None, verdict
    'ok' | 'numbers' | 'missing')."""
    printed = output.splitlines()
    pos, result = 0, list[tuple[int, str, str | None, str]]()
    for idx, q in quote_lines:
        if not q.strip() or q.strip() in ELIDE:
            continue
        hit, first_shape = None, None
        for k in range(pos, len(printed)):
            m = match_line(q, printed[k])
            if m:
                hit = k
                break
            if m is False and first_shape is None:
                first_shape = k
        if hit is not None:
            result.append((idx, q, printed[hit], "ok"))
            pos = hit + 1
        elif first_shape is not None:
            result.append((idx, q, printed[first_shape], "numbers"))
            pos = first_shape + 1
        else:
            result.append((idx, q, None, "missing"))
    return result


# ---- prose ------------------------------------------------------------------------------------

def prose_numbers(section: Section) -> list[tuple[int, str, tuple[float, int]]]:
    """(line, token, number) for each number the section's prose quotes, outside blockquotes (the
    seeds' words), inline code (inputs), links and images."""
    out = []
    for line, text in section.prose:
        if text.lstrip().startswith(">") or text.lstrip().startswith("|"):
            continue
        clean = re.sub(r"`[^`]*`", " ", text)
        clean = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", clean)
        for m in NUM.finditer(clean):
            tok = m.group(0)
            out.append((line, tok, numbers(tok)[0]))
    return out


# ---- python -----------------------------------------------------------------------------------

EXPECT = re.compile(r"^(?P<expr>[^#]+?)\s*#\s*=>\s*(?P<value>.+)$")


def python_checks(block: Block) -> list[tuple[int, str, str]]:
    """(line index, expression, quoted value) for each `EXPR  # => VALUE` line."""
    found = []
    for k, line in enumerate(block.lines):
        m = EXPECT.match(line.strip())
        if m and not line.startswith((" ", "\t")):
            found.append((k, m.group("expr").strip(), m.group("value").strip()))
    return found


def run_python(section: Section, cwd: Path, ns: dict[str, Any]) -> list[tuple[Block, int, str, str, str]]:
    """Run the section's python (and sh) blocks in order; (block, line index, expr, quoted, repr)."""
    results = []
    old = Path.cwd()
    os.chdir(cwd)
    try:
        for block in section.blocks:
            if block.lang == "sh":
                for b, _, cmd, tier in commands(section):
                    if b is block and tier == IN_PROCESS:
                        for r in run_command(cmd, cwd):
                            assert r.exit_code in (0, 1), f"{block.doc}:{block.line}: {r.cmd}\n{r.output}"
            if block.lang != "python":
                continue
            exec(compile("\n".join(block.lines), f"{block.doc}:{block.line}", "exec"), ns)
            for k, expr, value in python_checks(block):
                results.append((block, k, expr, value, repr(eval(expr, ns))))
    finally:
        os.chdir(old)
    return results


def rewrite(quoted: str, printed: str) -> str:
    """`quoted` with its numbers replaced by those of the printed line it quotes (the first run
    of printed tokens with the same words), as printed; the quoted spacing is kept."""
    q, p = _tokens(quoted), _tokens(printed)
    qs, ps = [_shape(t) for t in q], [_shape(t) for t in p]
    for start in range(len(p) - len(q) + 1):
        if ps[start:start + len(q)] == qs:
            new = iter([m.group(0) for m in NUM.finditer(" ".join(p[start:start + len(q)]))])

            def swap(_m: re.Match[str], new: Iterator[str] = new) -> str:
                return next(new)
            return NUM.sub(swap, quoted)
    return quoted


def fmt_like(quoted: str, actual: str) -> str:
    """`actual` (a repr) with each number written with the decimals its quoted one used."""
    qn, found = numbers(quoted), list(NUM.finditer(actual))
    if len(qn) != len(found):
        return actual
    parts, last = [], 0
    for (_, decimals), m in zip(qn, found, strict=True):
        value = float(m.group(0).replace(",", ""))
        parts += [actual[last:m.start()], f"{value:.{decimals}f}"]
        last = m.end()
    return "".join(parts) + actual[last:]
