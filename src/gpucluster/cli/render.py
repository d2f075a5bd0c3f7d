"""Moved to `gpucluster.report.terminal` (terminal rendering is the report layer's, and the
HTML report prints through the same consoles); kept so that the commands' imports keep working."""

from gpucluster.report.terminal import (_SafeConsole, console, err_console, num, one_line, plain, print_json,
                                        reset_consoles, safe, set_quiet)

__all__ = ["_SafeConsole", "console", "err_console", "num", "one_line", "plain", "print_json", "reset_consoles",
           "safe", "set_quiet"]
