"""`gpucluster simulate` as a function: a scenario (a YAML path, or one already loaded) through
the cluster simulator under a policy, returning what it measured.

    import gpucluster
    run = gpucluster.simulate("examples/scenarios/shared-vs-partitioned.yaml", policy="backfill", seed=1)
    run.summary["utilization"]["allocation"], run.document().goodput, len(run.jobs)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster.api_args import SIMULATE, checked

if TYPE_CHECKING:
    from gpucluster.documents.simulation import SimulationDocument
    from gpucluster.specs.scenario import LoadedScenario, Scenario


@dataclass
class SimulationRun:
    summary: dict[str, Any]      # the gpucluster-simulation/v1 document, as `simulate --json` prints it
    jobs: list[Any]              # every job (sim/jobs.py Job) with its submit, start, end and state
    sim: Any                     # the Simulation, for inspection (state, recorder, policy)

    def document(self) -> SimulationDocument:
        """The summary as its typed model (documents/simulation.py)."""
        from gpucluster.documents.simulation import SimulationDocument
        return SimulationDocument.model_validate(self.summary)


def load(scenario: str | Path | Scenario | LoadedScenario) -> LoadedScenario:
    """A scenario path, a Scenario model (relative paths from the working folder) or a loaded one."""
    from gpucluster.specs.scenario import LoadedScenario, Scenario, load_scenario

    if isinstance(scenario, LoadedScenario):
        return scenario
    if isinstance(scenario, Scenario):
        loaded = LoadedScenario(scenario, None, Path.cwd(), "<scenario>", {})
        if isinstance(scenario.cluster, str):
            from gpucluster.specs.cluster import load_cluster
            loaded.cluster = load_cluster(loaded.path(scenario.cluster))
        elif scenario.cluster is not None:
            loaded.cluster = scenario.cluster
        return loaded
    return load_scenario(scenario)


@checked(SIMULATE)
def simulate(scenario: str | Path | Scenario | LoadedScenario, *, policy: str | None = None, seed: int | None = None,
             events: Callable[[dict], None] | None = None, on_progress: Callable[[float], None] | None = None,
             on_start: Callable[[Any], None] | None = None, policy_field: str = "policy") -> SimulationRun:
    """Run the scenario under `policy` (default: the scenario's; `gpucluster simulate policies`
    lists them) with `seed` (default: the scenario's). `events` receives every event as a dict,
    `on_progress` the simulated time (seconds) now and then, `on_start` the built simulation
    before it runs (set `sim.kernel.stop_requested` to stop it early: the result is then marked
    partial). Bad input raises `UserError` naming the file, line and field."""
    from gpucluster.sim.run import simulate as run

    result = run(load(scenario), policy, seed, events, on_progress, policy_field=policy_field if policy else None,
                 keep_sim=on_start)
    return SimulationRun(result.summary, result.jobs, result.sim)
