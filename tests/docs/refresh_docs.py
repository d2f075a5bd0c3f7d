"""Rewrite the quoted output in the README, docs/tutorial.md and docs/api.md from real runs.

    PYTHONPATH=src python tests/docs/refresh_docs.py [--integration] [--check]

Every line quoted in a ```console block gets the numbers its command prints now (the words must
still match: a line whose words changed is listed, for a person to edit). `--integration` also
runs the lines the integration tier runs (a sweep, `bench collective`, the benchmark scripts:
minutes). A python block's `# => VALUE` gets what the expression returns now, written with the
quoted decimals. Numbers quoted in prose are not rewritten: the ones that no longer match are
rewritten when they are written exactly as a quoted number of the same section that moved; the
others that no longer match are listed, for a person to edit. `--check` writes nothing
and exits 1 when anything would change (what tests/docs/test_docs.py asserts).

Run it after a change to the model, the catalog or the output, then read the diff: a quoted
number that moved far is news for the prose around it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doccheck as D


def _outputs(section: D.Section, work: Path, integration: bool) -> dict[tuple[int, str], str]:
    """(block line, command) -> what it printed, for the lines run."""
    out: dict[tuple[int, str], str] = {}
    for block, _, cmd, tier in D.commands(section):
        if tier == D.IN_PROCESS:
            out[(block.line, cmd)] = "\n".join(r.output for r in D.run_command(cmd, work))
        elif tier == D.INTEGRATION_TIER and integration:
            line = cmd.replace("python ", f"{sys.executable} ", 1) if cmd.startswith("python ") else cmd
            env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
            proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=work, env=env)
            out[(block.line, cmd)] = proc.stdout + proc.stderr
    return out


def refresh(doc: str, integration: bool, tmp: Path) -> tuple[list[str], list[str]]:
    """(rewritten text lines, notes for a person)."""
    lines = (D.ROOT / doc).read_text(encoding="utf-8").splitlines()
    notes = []
    for n, section in enumerate(D.sections(doc)):
        work = D.workdir(tmp / f"{Path(doc).stem}-{n}", section)
        outputs = _outputs(section, work, integration)
        moved: dict[str, set[str]] = {}                 # a quoted number as written -> as printed now
        for block in section.blocks:
            if block.lang != "console":
                continue
            for quote in D.quotes(block):
                output = outputs.get((block.line, quote.cmd))
                if output is None:
                    continue
                for idx, q, printed, verdict in D.find_quoted(quote.lines, output):
                    where = block.line + 1 + idx            # 1-based line of the quoted text
                    if verdict == "numbers" and printed is not None:
                        lines[where - 1] = D.rewrite(q, printed)
                        for a, b in zip(D.NUM.findall(q), D.NUM.findall(lines[where - 1]), strict=False):
                            moved.setdefault(a, set()).add(b)
                    elif verdict == "missing":
                        notes.append(f"{doc}:{where}: `{q.strip()}` is no longer printed (edit by hand)")
        followed = _follow_in_prose(lines, section, moved)
        if any(b.lang == "console" for b in section.blocks):
            printed_numbers = [x for o in outputs.values() for x, _ in D.numbers(o)]
            for line, tok, quoted_num in D.prose_numbers(section):
                if (doc, tok) not in D.NOT_OUTPUT and tok not in followed and printed_numbers and \
                        not any(D.close(quoted_num, p) for p in printed_numbers):
                    notes.append(f"{doc}:{line}: the prose quotes {tok}, which the section's commands no longer print")
        if any(b.lang == "python" for b in section.blocks):
            import gpucluster
            with contextlib.redirect_stdout(io.StringIO()):      # what the snippets print
                checks = D.run_python(section, work, {"gpucluster": gpucluster})
            for block, k, expr, quoted, got in checks:
                qn, pn = D.numbers(quoted), [x for x, _ in D.numbers(got)]
                if len(qn) == len(pn) and all(D.close(a, b) for a, b in zip(qn, pn, strict=True)):
                    continue
                where = block.line + k                  # 0-based index of the line in `lines`
                if len(qn) == len(pn) and D.numbers(quoted) and "# =>" in lines[where]:
                    head = lines[where][:lines[where].index("# =>") + 4]
                    lines[where] = f"{head} {D.fmt_like(quoted, got)}"
                else:
                    notes.append(f"{doc}:{where + 1}: `{expr}` quotes {quoted}, now gives {got} (edit by hand)")
    return lines, notes


def _follow_in_prose(lines: list[str], section: D.Section, moved: dict[str, set[str]]) -> set[str]:
    """The prose of a section quotes the numbers of its console blocks: a number written exactly as
    a quoted one that moved (to one new value) moves with it, outside inline code and the seeds'
    quoted lines. The numbers that moved."""
    swap = {a: next(iter(b)) for a, b in moved.items() if len(b) == 1 and next(iter(b)) != a}
    for line, text in section.prose:
        if text.lstrip().startswith((">", "|")):
            continue
        parts = text.split("`")
        for k in range(0, len(parts), 2):            # even parts lie outside `code`
            parts[k] = D.NUM.sub(lambda m: swap.get(m.group(0), m.group(0)), parts[k])
        lines[line - 1] = "`".join(parts)
    return set(swap)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--integration", action="store_true", help="also run sweeps, bench collective, benchmark scripts")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a doc would change")
    ap.add_argument("docs", nargs="*", default=list(D.DOCS))
    args = ap.parse_args()
    changed = False
    with tempfile.TemporaryDirectory(prefix="refresh-docs-") as tmp:
        for doc in args.docs:
            new, notes = refresh(doc, args.integration, Path(tmp))
            path = D.ROOT / doc
            old = path.read_text(encoding="utf-8")
            text = "\n".join(new) + ("\n" if old.endswith("\n") else "")
            if text != old:
                changed = True
                print(f"{doc}: quoted output {'would be rewritten' if args.check else 'rewritten'}")
                if not args.check:
                    path.write_text(text, encoding="utf-8")
            for note in notes:
                print(note)
            changed |= bool(notes)
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
