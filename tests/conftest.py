"""Test tiers, applied by location (README, "Development"; docs/performance.md):

- `integration`: everything under tests/integration/ (real Slurm, Ray, torch.distributed, network
  namespaces), and elsewhere the tests that start the console script or an engine in a
  subprocess (each costs a second or more of CPU): the files listed in SUBPROCESS_FILES, and any
  other test that calls subprocess.run/Popen itself or through a helper (tests_cli_helpers.run:
  the console script), found by reading the test files.
- `browser`: the selenium tests of the HTML reports (also `integration`).
- `slow`: in-process tests that take seconds each (SLOW_TESTS).

`make test-fast` runs none of these (`-m "not integration and not browser and not slow"`);
`make test` runs all: the in-process ones (slow included) on every core, then the others serially.
"""

import ast
import os
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPUCLUSTER_SHARED", ROOT.parent / "shared"))

# pytest-xdist sets COLUMNS=80 in its workers: the in-process runs of the CLI would lay tables and
# messages out 80 wide there and 160 wide (a pipe) in a serial run. The same layout either way:
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

BROWSER_FILES = {"tests/integration/test_report_browser.py"}
# Files whose tests run the console script (or torch workers, a sweep) in subprocesses nearly
# throughout; other files are marked test by test (see _spawns).
SUBPROCESS_FILES = {
    "tests/bench/test_bench_collective.py", "tests/bench/test_compute.py", "tests/bench/test_diagnose.py",
    "tests/cli/test_advise_cli.py", "tests/cli/test_check_cli.py", "tests/cli/test_cli.py",
    "tests/cli/test_cost_cli.py", "tests/cli/test_plan_cli.py", "tests/cli/test_plan_serve_cli.py",
    "tests/cli/test_simulate_cli.py", "tests/engines/test_openmetrics.py", "tests/engines/test_sweep.py",
    "tests/generate/test_generators.py", "tests/generate/test_plan_input.py", "tests/report/test_report_cli.py",
    "tests/specs/test_scenario_checks.py",
}
# In-process tests that take seconds each (simulations checked at every event, hypothesis
# round trips; measured with `pytest --durations`): `slow`, left out of `make test-fast` only.
SLOW_TESTS = {
    "tests/sim/test_gavel_policies.py::test_round_invariants",
    "tests/sim/test_gavel_policies.py::test_round_policies_keep_the_simulators_invariants",
    "tests/sim/test_invariants.py::test_invariants_hold_at_every_event",
    "tests/sim/test_kueue.py::test_quota_invariants_hold_at_every_event",
    "tests/specs/test_cluster.py::test_dump_load_identity",
    "tests/generate/test_megatron_args.py::test_every_flag_is_a_known_megatron_argument",
    "tests/specs/test_safe_yaml.py::test_the_pure_python_parser_is_bounded_too",
    "tests/fuzz/test_fuzz_cli.py::test_cli_keeps_its_promises_on_mutated_inputs",
    "tests/generate/test_deepspeed_config.py::test_overlap_and_pipeline_partition",
}
_SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call"}  # subprocess.<these>


def _calls(node: ast.AST) -> set[str]:
    """Plain names this code calls, plus "subprocess" when it calls subprocess.run/Popen/..."""
    out = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            f = call.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "subprocess" \
                    and f.attr in _SUBPROCESS:
                out.add("subprocess")
    return out


@cache
def _spawners(path: Path) -> frozenset[str]:
    """Names usable in `path` that start a process: its own functions that call subprocess (or
    another such function), and those it imports from a helper module beside it or in tests/cli
    (tests_cli_helpers.run: the console script)."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for where in (path.parent, ROOT / "tests" / "cli"):
                helper = where / f"{node.module}.py"
                if helper.is_file() and helper != path:
                    names |= {a.asname or a.name for a in node.names if a.name in _spawners(helper)}
                    break
    funcs = {n.name: _calls(n) for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    changed = True
    while changed:
        changed = False
        for name, calls in funcs.items():
            if name not in names and ("subprocess" in calls or calls & names):
                names.add(name)
                changed = True
    return frozenset(names)


def _spawning_tests(path: Path) -> frozenset[str]:
    """The test functions of `path` that start a process themselves."""
    return frozenset(n for n in _spawners(path) if n.startswith("test"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        try:
            rel = path.relative_to(ROOT).as_posix()
        except ValueError:
            continue
        name = getattr(item, "originalname", item.name)
        if rel.startswith("tests/integration/") or rel in SUBPROCESS_FILES or name in _spawning_tests(path):
            item.add_marker(pytest.mark.integration)
        if rel in BROWSER_FILES:
            item.add_marker(pytest.mark.browser)
        if f"{rel}::{name}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def shared_dir() -> Path:
    if not (SHARED / "validation").is_dir():
        pytest.skip(f"shared/ not found at {SHARED}")
    return SHARED
