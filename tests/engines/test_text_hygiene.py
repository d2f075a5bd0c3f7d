"""Text hygiene (issue 23 item 8): bidi and other invisible format characters are refused in every
value written into a script or config (Trojan Source), and one-line errors quote at most ~200
characters of the user's input (a 100 kB value was printed whole)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from fuzz_oracle import classify, run_in_process
from slurm_stubs import install

from gpucluster.errors import UserError
from gpucluster.generate.quoting import check_text, comment, slurm_directive

FORMAT = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u2028",
          "\u2029", "\x85", "\x9b", "\u200b", "\u200f", "\u061c", "\ufeff"]


@pytest.mark.parametrize("char", FORMAT, ids=[f"U+{ord(c):04X}" for c in FORMAT])
def test_format_characters_never_reach_a_script(char):
    value = f"gpu{char}; rm -rf ~"
    with pytest.raises(UserError, match="format characters"):
        check_text(value, "--partition")
    with pytest.raises(UserError):
        slurm_directive(value)
    assert char not in comment(value)


def test_ordinary_unicode_is_kept():
    assert check_text("équipe-ü", "--job-name") == "équipe-ü"


def test_slurm_submit_refuses_a_bidi_partition(tmp_path, monkeypatch):
    env = install(tmp_path / "bin", {"sbatch": "5"})
    monkeypatch.setenv("PATH", env["PATH"])
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    code, out, err = run_in_process(["slurm", "submit", "job.sbatch", "--partition", "gpu\u202e", "--no-follow"],
                                    cwd=tmp_path)
    assert code == 2 and "U+202E" in err and not classify(code, out, err)


@pytest.mark.parametrize("argv", [
    ["plan", "train", "--model", "x" * 100_000, "--gpu", "H100:8"],
    ["plan", "serve", "--model", "llama2-7b", "--gpu", "H100:8", "--rate", "9" * 100_000],
    ["models", "y" * 100_000],
    ["topology", "--cluster", "z" * 3000],
])
def test_an_error_quotes_at_most_about_200_characters(tmp_path, argv):
    code, out, err = run_in_process(argv, cwd=tmp_path)
    assert code == 2 and not classify(code, out, err)
    assert len(err) < 700, len(err)


def test_clip_keeps_the_start_and_the_reason():
    from gpucluster.cli.app import clip
    line = clip("f.yaml:3: name: bad value '" + "a" * 10_000 + "': must be short")
    assert line.startswith("f.yaml:3: name:") and line.endswith("must be short") and len(line) < 300
