"""The README tour, docs/tutorial.md and docs/api.md run as written, and every number they quote
is what the tool prints (tests/docs/doccheck.py says what is read and the tolerance).

- test_section: each section's commands in-process, in order; exit codes, the quoted output
  excerpts (```console blocks) and the prose's numbers against the real output.
- test_python_section: each section's ```python blocks, with their `# => VALUE` checks.
- test_not_run: one skipped test per line that needs what the suite cannot give (a Slurm cluster
  with GPUs, a placeholder to fill in), with the reason (`make test` runs pytest -rs).
- test_integration_commands: the lines that start processes or engines (a sweep's workers, the
  torch workers of `bench collective`, the benchmark scripts), through the console script.

When the model changes, regenerate the quoted blocks: `python tests/docs/refresh_docs.py`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import doccheck as D

SECTIONS = [s for doc in D.DOCS for s in D.sections(doc)]
RUNNABLE = [s for s in SECTIONS if any(b.lang in ("sh", "console") for b in s.blocks)
            and not any(b.lang == "python" for b in s.blocks)]
PYTHON = [s for s in SECTIONS if any(b.lang == "python" for b in s.blocks)]
NOT_RUN = [(s, cmd, tier) for s in SECTIONS for _, _, cmd, tier in D.commands(s)
           if tier not in (D.IN_PROCESS, D.INTEGRATION_TIER)]
INTEGRATION = [s for s in SECTIONS if any(t == D.INTEGRATION_TIER for *_, t in D.commands(s))]


def _quoted_problems(block: D.Block, quote: D.Quote, output: str) -> list[str]:
    return [f"{block.doc}:{block.line + 1 + idx}: quoted `{q.strip()}`\n    printed `{(p or '').strip()}` ({verdict})"
            for idx, q, p, verdict in D.find_quoted(quote.lines, output) if verdict != "ok"]


def _prose_problems(section: D.Section, outputs: list[str]) -> list[str]:
    printed = [n for out in outputs for n, _ in D.numbers(out)]
    bad = []
    for line, tok, q in D.prose_numbers(section):
        if (section.doc, tok) in D.NOT_OUTPUT:
            continue
        if not any(D.close(q, p) for p in printed):
            bad.append(f"{section.doc}:{line}: the prose quotes {tok}, which no command of this section printed "
                       f"(within {D.REL_TOL:.1%} or the quoted precision)")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("section", RUNNABLE, ids=[s.id for s in RUNNABLE])
def test_section(section: D.Section, tmp_path: Path) -> None:
    work = D.workdir(tmp_path, section)
    outputs, problems, quoted = [], [], False
    console = {id(b): {q.cmd: q for q in D.quotes(b)} for b in section.blocks if b.lang == "console"}
    for block, _, cmd, tier in D.commands(section):
        if tier != D.IN_PROCESS:
            continue
        for run in D.run_command(cmd, work):
            assert run.exit_code in (0, 1), f"{section.doc}:{block.line}: `{run.cmd}` exited {run.exit_code}\n{run.output}"
            outputs.append(run.output)
        quote = console.get(id(block), {}).get(cmd)
        if quote is not None:
            quoted = True
            problems += _quoted_problems(block, quote, outputs[-1])
    if quoted:
        problems += _prose_problems(section, outputs)
    assert not problems, "the doc drifted from the tool (python tests/docs/refresh_docs.py):\n" + "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("section", PYTHON, ids=[s.id for s in PYTHON])
def test_python_section(section: D.Section, tmp_path: Path) -> None:
    import gpucluster

    work = D.workdir(tmp_path, section)
    problems = []
    for block, k, expr, quoted, printed in D.run_python(section, work, {"gpucluster": gpucluster}):
        qn, pn = D.numbers(quoted), [n for n, _ in D.numbers(printed)]
        if len(qn) != len(pn) or not all(D.close(a, b) for a, b in zip(qn, pn, strict=True)):
            problems.append(f"{block.doc}:{block.line + 1 + k}: `{expr}` quoted {quoted}, gives {printed}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("section, cmd, reason", NOT_RUN, ids=[f"{s.doc}:{c[:50]}" for s, c, _ in NOT_RUN])
def test_not_run(section: D.Section, cmd: str, reason: str) -> None:
    assert reason.strip(), cmd
    pytest.skip(f"{section.doc}: `{cmd[:70]}`: {reason}")


def _shell(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One doc line through bash, with this venv's console script and python first on PATH."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160", "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    line = re.sub(r"^python\b", sys.executable, cmd)
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


@pytest.mark.parametrize("section", INTEGRATION, ids=[s.id for s in INTEGRATION])
def test_integration_commands(section: D.Section, tmp_path: Path) -> None:
    work = D.workdir(tmp_path, section)
    console = {id(b): {q.cmd: q for q in D.quotes(b)} for b in section.blocks if b.lang == "console"}
    problems, outputs = [], []
    quoted_tiers = {t for b, _, c, t in D.commands(section) if c in console.get(id(b), {})}
    for block, _, cmd, tier in D.commands(section):
        if tier != D.INTEGRATION_TIER:
            continue
        if cmd.startswith("gpucluster bench"):
            pytest.importorskip("torch", reason="`bench collective` needs the torch extra (make test installs it)")
        proc = _shell(cmd, work)
        assert proc.returncode in (0, 1), f"{section.doc}:{block.line}: `{cmd}` exited {proc.returncode}\n{proc.stderr}"
        outputs.append(proc.stdout + proc.stderr)
        quote = console.get(id(block), {}).get(cmd)
        if quote is not None:
            problems += _quoted_problems(block, quote, outputs[-1])
    if quoted_tiers == {D.INTEGRATION_TIER}:        # test_section checks the prose of the others
        problems += _prose_problems(section, outputs)
    assert not problems, "the doc drifted from the tool (python tests/docs/refresh_docs.py):\n" + "\n".join(problems)


def test_every_runnable_line_is_run_or_skipped_with_a_reason() -> None:
    tiers = [t for s in SECTIONS for *_, t in D.commands(s)]
    assert tiers.count(D.IN_PROCESS) >= 30, tiers        # the README tour and the tutorial run in-process
    assert all(t for t in tiers)
    # Every console block quotes some output.
    for s in SECTIONS:
        for b in s.blocks:
            if b.lang == "console":
                assert any(t.strip() and t.strip() not in D.ELIDE for q in D.quotes(b) for _, t in q.lines), \
                    (b.doc, b.line)


def test_matching_rules() -> None:
    """The tolerance and the excerpt rules, on lines the tool prints."""
    printed = "  step 17.144 s | 244,657 tokens/s (956 per GPU) | MFU 46.5% | HFU 46.5%"
    assert D.match_line("step 17.1 s | 244,657 tokens/s", printed)
    assert D.match_line("MFU 46.5%", printed) and D.match_line("MFU 47%", printed)     # printed precision
    assert D.match_line("step 17.3 s", printed) is False                                # 0.9% off
    assert D.match_line("step 17.144 s | 245,800 tokens/s", printed)                    # 0.47%: within 0.5%
    assert D.match_line("step 17.144 s | 246,000 tokens/s", printed) is False
    assert D.match_line("MTBF 24.7 h", printed) is None
    assert D.match_line("│ jobs completed │ 1,158 │", "│ jobs completed   │    1,158 │  1,190 │")
    assert [n for n, _ in D.numbers("tp=1 pp=32 1.44x 2T NDR400 -0.5")] == [1, 32, 1.44, 2, 400, -0.5]
    found = D.find_quoted([(0, "a 1"), (1, "..."), (2, "b 2")], "a 1\nx\nb 2.4\n")
    assert [v for *_, v in found] == ["ok", "ok"]
    assert [v for *_, v in D.find_quoted([(0, "b 3")], "b 2\n")] == ["numbers"]
    assert [v for *_, v in D.find_quoted([(0, "c 3")], "b 2\n")] == ["missing"]


def test_readme_says_what_make_test_installs_and_how_long() -> None:
    text = (D.ROOT / "README.md").read_text()
    setup = text[text.index("## Set up"):text.index("## A short tour")]
    for thing in ("root", "Slurm", "MariaDB", "Chromium", "torch", "Ray", "megatron-core", "DeepSpeed"):
        assert thing in setup, thing
    assert re.search(r"\d+\s*(-|to)\s*\d+\s*min", setup), "how long `make test` takes"
    for target in ("make test:", "make test-fast", "make demo", "make lint"):
        assert target.rstrip(":") in setup


def test_readme_layout_tree_is_the_tree() -> None:
    """Every folder the README's layout lists exists where it is drawn, and every package of
    src/gpucluster is listed."""
    text = (D.ROOT / "README.md").read_text()
    block = next(b for s in D.sections("README.md") if s.title == "Layout" for b in s.blocks)
    listed, parent = set(), None
    for line in block.lines:
        m = re.match(r"^(\s*)([\w./-]+/)\s", line + " ")
        if not m:
            continue
        name = m.group(2).rstrip("/")
        if not m.group(1):
            parent = name
            path = D.ROOT / name
        else:
            assert parent is not None, line
            path = D.ROOT / parent / name
            listed.add(name)
        assert path.is_dir(), f"README layout: {path.relative_to(D.ROOT)} is not a folder ({line.strip()})"
    packages = {p.name for p in (D.ROOT / "src/gpucluster").iterdir() if (p / "__init__.py").is_file()}
    assert packages <= listed, f"not in the README's layout: {sorted(packages - listed)}"
    assert "Layout" in text
