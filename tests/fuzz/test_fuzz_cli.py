"""Property: whatever the input file holds, `gpucluster` exits 0, 1 or 2; on 2 it prints exactly
one line; it never prints a traceback, never lets rich eat or interpret markup from the input,
never lets a control character through. Cases are the real examples mutated (fuzz_cases.py).

The slice in `make test` runs GPUCLUSTER_FUZZ_EXAMPLES cases (default 30, a few seconds of CPU
each at most) of the fast commands, deterministically (`derandomize`), so a red run is
reproducible; set GPUCLUSTER_FUZZ_EXAMPLES=500 (and GPUCLUSTER_FUZZ_SLOW=1 for plan, check,
simulate and traces) for a longer look, or run benchmarks/fuzz_long.py for thousands of cases
in separate processes under memory and CPU limits.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_cases import KINDS, make_case
from fuzz_mutations import DataSource, RandomSource
from fuzz_oracle import classify, run_in_process

EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_EXAMPLES", "30"))
SLOW = os.environ.get("GPUCLUSTER_FUZZ_SLOW", "") not in ("", "0")
TIMEOUT_S = float(os.environ.get("GPUCLUSTER_FUZZ_TIMEOUT", "60"))


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not SLOW,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_cli_keeps_its_promises_on_mutated_inputs(tmp_path_factory, data):
    case = make_case(DataSource(data), slow=SLOW)
    folder = tmp_path_factory.mktemp("case")
    case.write(folder)
    code, out, err = run_in_process(case.args(folder), timeout_s=TIMEOUT_S, cwd=folder,
                                    env=case.environment(folder), call=case.call)
    problems = classify(code, out, err, refuse=case.refuse, expect=case.expect)
    assert not problems, (f"{problems}: gpucluster {' '.join(case.args(folder))!r} on {case.kind} "
                          f"({case.note}); exit {code}\n--- stderr\n{err[-3000:]}\n--- stdout\n{out[-1500:]}")


# Every input kind, whatever hypothesis draws above: two seeded cases of each (the seeds of the
# long run's generator, so `benchmarks/fuzz_long.py` can rerun the same kinds at scale).
KIND_SEEDS = [(kind, seed) for kind in KINDS for seed in (1, 2)]


@pytest.mark.parametrize("kind,seed", KIND_SEEDS, ids=[f"{k}-{s}" for k, s in KIND_SEEDS])
def test_every_input_kind(tmp_path, kind, seed):
    case = KINDS[kind](RandomSource(seed), False)
    case.write(tmp_path)
    code, out, err = run_in_process(case.args(tmp_path), timeout_s=TIMEOUT_S, cwd=tmp_path,
                                    env=case.environment(tmp_path), call=case.call)
    problems = classify(code, out, err, refuse=case.refuse, expect=case.expect)
    assert not problems, (f"{problems}: gpucluster {' '.join(case.args(tmp_path))!r} on {kind} ({case.note}); "
                          f"exit {code}\n--- stderr\n{err[-3000:]}\n--- stdout\n{out[-1500:]}")
