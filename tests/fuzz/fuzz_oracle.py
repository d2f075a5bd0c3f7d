"""The fuzz oracle: what a run of a case may and may not print (`classify`), the rules that say a
value is known to be invalid (wrong accepts), and running a case in-process."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any



from fuzz_mutations import MARKUP_PROBES


# --- wrong accepts: values the case knows are invalid ---------------------------------------

@dataclass(frozen=True)
class Rule:
    """The values a field may hold. `strict`: bools and numeric strings are wrong too (a strict
    schema); otherwise they are left undecided (a lax reader may convert "8" or true)."""
    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False
    lo_open: bool = False
    strict: bool = False
    optional: bool = False
    pattern: str | None = None           # a name: the whole value must match


def invalid(value: Any, rule: Rule) -> bool | None:
    """True: `value` is known to be wrong for the field; False: known right; None: undecided."""
    import re

    if value is None:
        return not rule.optional if rule.strict or rule.pattern is not None else (None if rule.optional else True)
    if rule.pattern is not None:
        return not (isinstance(value, str) and re.fullmatch(rule.pattern, value) is not None)
    if isinstance(value, bool) or isinstance(value, str):
        if rule.strict:
            return True
        if isinstance(value, bool):
            return None
        try:
            value = float(value)
        except ValueError:
            return True
        return None if math.isfinite(value) and rule.lo <= value <= rule.hi else True
    if not isinstance(value, (int, float)):
        return True                      # a list or a mapping where a number belongs
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if rule.integer and isinstance(value, float) and (rule.strict or not value.is_integer()):
        return True
    if value < rule.lo or value > rule.hi or (rule.lo_open and value == rule.lo):
        return True
    return False


def _matches(pattern: tuple, path: tuple) -> bool:
    return len(pattern) == len(path) and all(a == "*" or a == b for a, b in zip(pattern, path, strict=True))


# --- the oracle -------------------------------------------------------------------------------

def classify(code: int | str | None, out: str, err: str, refuse: bool = False, expect: str | None = None) -> list[str]:
    """What is wrong with one run: [] when the run kept every promise. `code` is the exit
    status, or "timeout" / "memory" when the runner stopped it; `refuse`: the input holds a value
    the case knows is invalid, so exit 0 is a wrong accept (an error, exit 2, or a finding, exit 1,
    is right); `expect`: the run must be an error (exit 2) whose line holds this text (the option
    the case made wrong, not another one refused after it took the wrong value)."""
    if code in ("timeout", "memory"):
        return [{"timeout": "hang", "memory": "memory"}[str(code)]]
    problems = []
    if (refuse and code == 0) or (expect is not None and code in (0, 1, 2) and (code != 2 or expect not in err)):
        problems.append("wrong-accept")
    if "Traceback (most recent call last)" in out + err or code not in (0, 1, 2):
        problems.append("traceback" if "MemoryError" not in err else "memory")
    if "MarkupError" in out + err or any(eaten in out + err for eaten in MARKUP_PROBES.values()):
        problems.append("markup")
    if "\x1b" in out + err or "\x07" in out + err or "\x9b" in out + err:
        problems.append("escape")
    if code == 2 and len(err.strip().splitlines()) != 1:
        problems.append("not-one-line")
    return problems


# --- running a case in this process (the pytest slice) ---------------------------------------

class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` in the code under
    test can swallow it."""


def run_in_process(argv: list[str], timeout_s: float = 60.0, cwd: Path | None = None, env: dict[str, str] | None = None,
                   call: dict[str, Any] | None = None) -> tuple[int | str, str, str]:
    """`gpucluster ARGV` through the real entry point (`main`: its UserError -> one line, exit 2
    handling included), with stdout and stderr captured; ("timeout", ...) past `timeout_s`. In
    `cwd` (the case's folder): a relative output path (`-o 30`) lands there, not in the checkout."""
    import contextlib
    import io
    import signal
    import sys
    import traceback

    from gpucluster.cli import app as app_module

    out, err = io.StringIO(), io.StringIO()
    code: int | str = 0

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    import os

    old_handler, old_argv = signal.signal(signal.SIGALRM, on_alarm), sys.argv
    env = {k: v.replace("$PATH", os.environ.get("PATH", "")) for k, v in (env or {}).items()}
    old_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        sys.argv = ["gpucluster", *argv]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                contextlib.chdir(cwd or Path.cwd()):
            try:
                if call is not None:
                    from fuzz_api_cases import run_call
                    code = run_call(call, cwd or Path.cwd())
                else:
                    app_module.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except CaseTimeout:
                code = "timeout"
            except Exception:                       # what a user would see as a traceback
                traceback.print_exc(file=err)
                code = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.argv = old_argv
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()
