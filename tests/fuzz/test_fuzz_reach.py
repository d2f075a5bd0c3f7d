"""The fuzzer reaches every entry point: every parameter of every public API function has a kind
in the `api` table, and every CLI command has a working baseline in the `anyopt` table (whose
options are read from the CLI itself). A parameter or a command added later fails here until the
fuzzer knows it (issue 23 item 10)."""

from __future__ import annotations

import importlib
import inspect

import gpucluster
from fuzz_api_cases import API, POSITIONAL
from fuzz_option_cases import BASE, SKIP, cli_options

RESULT_TYPES = {"TrainingPlan", "ServePlan", "SimulationRun", "CheckReport", "UserError"}


def test_every_api_parameter_has_a_fuzz_kind():
    for name in sorted(set(gpucluster.__all__) - RESULT_TYPES - {"__version__"}):
        assert name in API, f"gpucluster.{name} is public but not in fuzz_api_cases.API"
        # The function itself (gpucluster.check may be the callable package, whose signature is
        # (*args, **kwargs), once gpucluster.check.* has been imported)
        module, attr = gpucluster._API[name]
        params = inspect.signature(getattr(importlib.import_module(module), attr)).parameters
        missing = sorted(set(params) - set(API[name][2]))
        assert not missing, f"gpucluster.{name}: parameters the api fuzz kind never varies: {missing}"
        assert set(POSITIONAL[name]) <= set(params)


def test_every_command_has_an_anyopt_baseline():
    commands = cli_options()
    left_out = {"simulate policies"}      # no option but --json
    assert sorted(set(commands) - set(BASE) - left_out) == []
    assert sorted(set(BASE) - set(commands)) == []
    reached = sum(1 for c in BASE for o in commands[c] if o[0] not in SKIP)
    assert reached >= 200, reached     # options and positional arguments the kind varies
