import json
import math

import numpy as np

from gpucluster.cli.render import print_json


def test_json_output_is_strict_and_infinite_numbers_are_null(capsys):
    print_json({"break_even_months": math.inf, "x": [1.5, float("nan"), np.float64(2.0)], "n": np.int64(3)})
    data = json.loads(capsys.readouterr().out)
    assert data == {"break_even_months": None, "x": [1.5, None, 2.0], "n": 3}


# --- user text on the terminal (issue 15): markup escaped, control characters made visible ---

import io  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from rich.console import Console  # noqa: E402

from gpucluster.cli.render import _SafeConsole, one_line, plain, safe  # noqa: E402


def printed(markup: str, console_cls: type[Console] = _SafeConsole) -> str:
    buf = io.StringIO()
    console_cls(file=buf, width=10_000, highlight=False, color_system=None).print(markup, soft_wrap=True)
    return buf.getvalue().removesuffix("\n")


@pytest.mark.parametrize("text", ["lab [/x]", "lab cluster [estimate]", "pool[a]", "[link=file:///etc/passwd]x[/link]",
                                  "a\\", "[bold]", "[/]", "\\[x]"])
def test_safe_prints_markup_literally(text):
    assert printed(f"[bold]{safe(text)}[/bold]: rest") == f"{text}: rest"


def test_control_characters_become_visible():
    assert plain("\x1b]0;TITLE\x07") == "\\x1b]0;TITLE\\x07"
    assert plain("a\u202eb\x9bc\x7f") == "a\\u202eb\\x9bc\\x7f"
    assert plain("a\nb\tc") == "a\\x0ab\\x09c" and plain("a\nb\tc", multiline=True) == "a\nb\tc"
    assert one_line("first\nsecond\r\nthird\x1b") == "first second third\\x1b"


def test_the_console_net_catches_a_forgotten_site():
    """A print site that forgot safe(): rich would pass ESC through; our console does not (and
    still emits its own styles: the net filters text, not rich's escapes)."""
    assert "\x1b" in printed("x\x1b]0;T end", Console)         # what rich alone does
    assert printed("x\x1b]0;T end") == "x\\x1b]0;T end"
    buf = io.StringIO()
    _SafeConsole(file=buf, force_terminal=True, color_system="standard", highlight=False).print("[red]x\x1b[2J[/red]")
    out = buf.getvalue()
    assert "\x1b[31m" in out and "\x1b[2J" not in out and "\\x1b[2J" in out    # rich's red, the user's ESC shown


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_any_text_through_safe_prints_exactly_its_plain_form(text):
    assert printed(f"[bold]{safe(text)}[/bold]") == plain(text)
