"""`simulate compare` shows where round-based policies lose time: reloads after moves in their
own row and column, a busy series that is busy (not allocation), figures quoting their
tables, conclusions ranked on completion time and goodput, both kinds of wait, and a
progress report that advances during a run of few, slow events."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from helpers import gavel_small_scenario

pytest.importorskip("scipy", reason="the round-based policies solve LPs with scipy (pip install '.[test]')")

from gpucluster.sim.request import simulate

DATA = Path(__file__).parent / "data"


def _scenario(tmp_path: Path, policy: str = "max_min_fairness", restart_s: float = 60.0,
              checkpoint: str = "") -> Path:
    return gavel_small_scenario(tmp_path / f"gavel-{policy}.yaml", policy, f"    restart_s: {restart_s}\n{checkpoint}\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    return {p: simulate(_scenario(tmp, p)) for p in ("max_min_fairness", "fifo_perf")}


def test_move_restarts_have_their_own_row_and_class_column(runs) -> None:
    s = runs["max_min_fairness"].summary
    g = s["gpu_hours"]
    assert g["restart_preemption"] > 0           # moves and time slices reload: 60 s each
    assert g["restart"] == 0                     # no failures in this scenario
    assert math.isclose(sum(g.values()), s["utilization"]["allocated_gpu_hours"], rel_tol=1e-6)
    assert s["goodput"] == pytest.approx(g["useful"] / s["utilization"]["allocated_gpu_hours"])
    c = s["classes"]["philly"]
    assert c["restart_preemption_gpu_hours"] == pytest.approx(g["restart_preemption"])
    assert c["preemptions"] > 0
    # each reload after a preemption costs restart_s on the job's GPUs, no more
    jobs = runs["max_min_fairness"].jobs
    assert g["restart_preemption"] <= sum(j.preemptions * j.gpu_share * 60.0 for j in jobs) / 3600 + 1e-6


def test_compare_table_shows_the_move_restarts(runs, capsys) -> None:
    from gpucluster.cli.simulate_render import render_compare, render_summary
    render_compare({p: r.summary for p, r in runs.items()})
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "restarts after preemptions, moves GPU-h" in line)
    want = f"{runs['max_min_fairness'].summary['gpu_hours']['restart_preemption']:,.0f}"
    assert want in row and want != "0"
    assert "mean wait to first start" in out and "mean time queued" in out
    render_summary(runs["max_min_fairness"].summary)
    out = capsys.readouterr().out
    assert f"restarts after preemptions and moves {want}" in out


def test_busy_series_is_busy_not_allocation(runs) -> None:
    s = runs["max_min_fairness"].summary
    ts = s["timeseries"]
    n = len(ts["busy"])
    # constant capacity, equal buckets over the run: the series' mean is the run's figure
    assert sum(ts["busy"]) / n == pytest.approx(s["utilization"]["busy"], abs=0.002)
    assert sum(ts["allocation"]) / n == pytest.approx(s["utilization"]["allocation"], abs=0.002)
    assert s["utilization"]["busy"] < s["utilization"]["allocation"] - 0.01
    assert ts["busy"] != ts["allocation"]


def test_wait_to_first_start_and_time_queued(runs) -> None:
    tsh = runs["max_min_fairness"].summary["classes"]["philly"]
    assert tsh["queued_s"]["mean"] > tsh["wait_s"]["mean"]       # time-sharing: preempted spells add up
    for j in runs["fifo_perf"].jobs:                              # FIFO_Perf may move a job; check the account
        assert j.end - j.submit - j.ran_s >= j.first_start - j.submit - 1e-6
    for j in runs["max_min_fairness"].jobs:
        assert j.ran_s <= j.end - j.first_start + 1e-6


def test_report_figures_quote_their_tables(runs) -> None:
    from gpucluster.report.ops_report import completion_times, simulate_report
    rep = simulate_report({p: r.summary for p, r in runs.items()},
                          {p: completion_times(r.jobs) for p, r in runs.items()})
    table = rep.tables[0]
    cols = table.columns
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in table.rows}
    util = next(f for f in rep.figures if f.key == "utilization").caption
    for p, a, b in re.findall(r"(\w+): ([\d.]+%) allocated, ([\d.]+%) busy", util):
        assert rows[p]["allocation"] == a and rows[p]["busy"] == b
    assert len(re.findall(r"allocated, ", util)) == len(runs)
    jct = next(f for f in rep.figures if f.key == "jct").caption
    found = re.findall(r"(\w+): median ([\d.]+ \w+), p99 ([\d.]+ \w+)", jct)
    assert len(found) == len(runs)
    for p, med, p99 in found:
        assert rows[p]["JCT p50"] == med and rows[p]["JCT p99"] == p99


def _fake(completed: int, alloc: float, goodput: float) -> dict:
    return {"jobs": {"completed": completed}, "utilization": {"allocation": alloc}, "goodput": goodput,
            "partial": False, "policy": "x",
            "gpu_hours": {"restart": 0.0, "restart_preemption": 100.0, "lost_failures": 0.0, "lost_preemption": 0.0}}


def test_conclusions_rank_on_completion_time_then_goodput_not_allocation() -> None:
    from gpucluster.report.ops_report import conclusions
    summaries = {"hog": _fake(10, 0.95, 0.45), "quick": _fake(10, 0.60, 0.99)}
    jcts = {"hog": [36000.0] * 10, "quick": [3600.0] * 10}
    out = conclusions(summaries, jcts)
    assert out[0].startswith("quick completes jobs soonest")
    assert any(c.startswith("quick wastes the least") and "hog the most" in c for c in out)
    assert not any("allocates the most" in c for c in out)


def test_progress_advances_during_a_run_of_few_events(tmp_path, monkeypatch) -> None:
    import gpucluster.sim.simulator as simulator
    from gpucluster.cli.simulate_render import progress_of
    monkeypatch.setattr(simulator, "PROGRESS_EVERY_S", 0.0)
    seen: list[float] = []
    box: dict = {}

    def on_progress(t: float) -> None:
        seen.append(progress_of(box["sim"], t)[0])

    run = simulate(_scenario(tmp_path, restart_s=0.0), on_progress=on_progress,
                   on_start=lambda s: box.__setitem__("sim", s))
    assert run.summary["events"] < 20000        # the kernel alone would report nothing
    assert len(seen) > 10
    assert seen == sorted(seen) and 0 < seen[len(seen) // 2] < 1
    assert progress_of(run.sim, run.sim.end_time)[0] == 1.0


def test_a_reload_as_long_as_a_round_is_refused(tmp_path) -> None:
    from gpucluster.errors import UserError
    with pytest.raises(UserError, match=r"restart_s \(360 s\) is not below the policy's round_s"):
        simulate(_scenario(tmp_path, restart_s=360.0))
    p = _scenario(tmp_path, restart_s=400.0)       # with a horizon it ends there, and says why
    p.write_text(p.read_text().replace("seed: 0", "seed: 0\nhorizon_days: 2"))
    run = simulate(p)
    assert run.summary["simulated_days"] == pytest.approx(2.0)
    assert any("never gets past its reload" in n for n in run.summary["notes"])


def test_equal_goodput_is_not_ranked() -> None:
    from gpucluster.report.ops_report import conclusions
    out = conclusions({"a": _fake(10, 0.9, 0.984), "b": _fake(10, 0.8, 0.9841)}, {"a": [3600.0], "b": [7200.0]})
    assert any(c.startswith("Goodput is 98.4% under every policy") for c in out)
    assert not any("wastes the least" in c for c in out)


def test_equal_mean_completion_time_is_not_ranked() -> None:
    from gpucluster.report.ops_report import conclusions
    # 9.1 h and 9.1 h as the table prints them (seconds apart): neither "completes jobs soonest"
    out = conclusions({"a": _fake(10, 0.9, 0.8), "b": _fake(10, 0.8, 0.99), "c": _fake(10, 0.7, 0.9)},
                      {"a": [32761.0], "b": [32760.0], "c": [72000.0]})
    assert out[0].startswith("Mean completion time is 9.1 h under b, a (10 completed jobs each)")
    assert "c 20.0 h (10)" in out[0]
    assert not any("completes jobs soonest" in c for c in out)
    # fewer jobs completed is not a tie, whatever the mean
    out = conclusions({"a": _fake(10, 0.9, 0.8), "b": _fake(9, 0.8, 0.99)}, {"a": [32761.0], "b": [32760.0]})
    assert out[0].startswith("a completes jobs soonest")


def test_the_class_table_names_the_cause_of_its_restart_count(runs, capsys) -> None:
    # time-sharing preempts and reloads jobs all the time while no failure restarts one: a column
    # headed "restarts" that reads 0 beside them would say no job restarted
    from gpucluster.cli.simulate_render import console, render_summary
    s = runs["max_min_fairness"].summary
    assert s["classes"]["philly"]["restarts"] == 0 and s["classes"]["philly"]["preemptions"] > 0
    width = console.width
    console.width = 200
    try:
        render_summary(s)
    finally:
        console.width = width
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if "JCT mean" in line and "GPU-h" in line)
    cols = [c.strip() for c in re.split(r"[┃│]", head) if c.strip()]
    assert "restarts" not in cols and "failure restarts" in cols
