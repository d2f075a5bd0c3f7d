import pytest

from gpucluster.engines.openmetrics import Family, collective_families, render, write_textfile
from gpucluster.errors import UserError


def test_render_text_and_openmetrics(tmp_path):
    f = Family("gpucluster_jobs_finished_total", "counter", "Jobs that finished").add(3, policy='fi"fo')
    g = Family("gpucluster_gpu_utilization_ratio", "gauge", "Busy GPU time / GPU time").add(0.5)
    text = render([f, g])
    assert '# TYPE gpucluster_jobs_finished_total counter' in text
    assert 'gpucluster_jobs_finished_total{policy="fi\\"fo"} 3' in text
    assert "gpucluster_gpu_utilization_ratio 0.5" in text
    om = render([f], openmetrics=True)
    assert "# TYPE gpucluster_jobs_finished counter" in om and om.endswith("# EOF\n")
    with pytest.raises(ValueError):
        render([Family("bad name", "gauge", "x")])
    with pytest.raises(ValueError):
        render([Family("gpucluster_x", "counter", "x")])
    p = tmp_path / "m.prom"
    write_textfile(str(p), [g])
    assert p.read_text() == render([g]) and not list(tmp_path.glob(".gpucluster-*"))
    assert p.stat().st_mode & 0o777 == 0o644          # a collector running as another user reads it
    write_textfile(str(p), [g], openmetrics=True)
    assert p.read_text() == render([g], openmetrics=True) and p.read_text().endswith("# EOF\n")


def test_failed_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "m.prom").mkdir()          # os.replace onto a folder fails: refused before, one line
    g = Family("gpucluster_x_ratio", "gauge", "x").add(1)
    with pytest.raises(UserError, match="folder"):
        write_textfile(str(tmp_path / "m.prom"), [g])
    assert not list(tmp_path.glob(".gpucluster-*")) and not list(tmp_path.glob(".m.prom*"))


@pytest.mark.parametrize("name", ["a" * 300 + ".prom", "loop", "fifo", "/dev/full", "missing/m.prom", "x\0"])
def test_every_bad_target_is_one_line(tmp_path, name):
    """issue 23: bench storage --metrics gave tracebacks on 11 of 13 bad targets."""
    import os
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    g = Family("gpucluster_x_ratio", "gauge", "x").add(1)
    with pytest.raises(UserError) as info:
        write_textfile(str(tmp_path / name.replace("\\0", "\0")) if not name.startswith("/") else name, [g])
    assert "\n" not in info.value.message and len(info.value.message) < 500


def test_no_infinite_sample_from_finite_figures():
    with pytest.raises(UserError, match="finite"):
        Family("gpucluster_x_seconds", "gauge", "x", "seconds").add(1e306 * 3600)


def test_collective_families_base_units():
    res = {"op": "all_gather", "backend": "gloo", "world_size": 2, "nodes": 1,
           "rows": [{"size_bytes": 1024, "busbw_gbps": 1.5, "algbw_gbps": 1.5, "time_us": 10.0, "wrong": 0,
                     "placement": "out-of-place",
                     "in_place": {"busbw_gbps": 2.0, "algbw_gbps": 2.0, "time_us": 8.0, "wrong": 0}}]}
    text = render(collective_families(res))
    assert ('gpucluster_collective_busbw_bytes_per_second{op="all_gather",backend="gloo",ranks="2",nodes="1",'
            'size_bytes="1024",placement="out-of-place"} 1500000000') in text
    assert 'size_bytes="1024",placement="in-place"} 2000000000' in text
    assert "gpucluster_collective_time_seconds{" in text


def test_simulation_families_and_cli(tmp_path):
    import json

    from tests_cli_helpers import assert_one_line_error, run
    summary = {"schema": "gpucluster-simulation/v1", "scenario": "s", "policy": "fifo",
               "utilization": {"allocation": 0.5, "busy": 0.4}, "gpu_hours": {"useful": 2.0},
               "jobs": {"total": 3, "completed": 2, "failed": 1, "not_run": {}}, "goodput": 0.9,
               "classes": {"llm": {"wait_s": {"mean": 5.0, "p99": None}, "jct_s": {"p50": 60.0}}},
               "cost": {"on_prem_usd": 10.0}}
    p = tmp_path / "sim.json"
    p.write_text(json.dumps(summary))
    text = run("metrics", str(p), check_rc=0).stdout
    assert 'gpucluster_sim_utilization_ratio{scenario="s",policy="fifo",kind="busy"} 0.4' in text
    assert 'gpucluster_sim_gpu_seconds{scenario="s",policy="fifo",use="useful"} 7200' in text
    assert 'gpucluster_sim_jobs{scenario="s",policy="fifo",state="failed"} 1' in text
    assert 'stat="p99"' not in text and 'gpucluster_sim_wait_seconds{scenario="s",policy="fifo",workload="llm",' \
                                       'stat="mean"} 5' in text
    out = tmp_path / "sim.prom"
    run("metrics", str(p), "-o", str(out), check_rc=0)
    assert out.read_text() == text and out.stat().st_mode & 0o777 == 0o644
    om = run("metrics", str(p), "--openmetrics", check_rc=0).stdout
    assert om.endswith("# EOF\n") and "# UNIT gpucluster_sim_gpu_seconds seconds" in om
    run("metrics", str(p), "-o", str(out), "--openmetrics", check_rc=0)
    assert out.read_text() == om                     # the file gets what stdout gets: OpenMetrics
    assert_one_line_error(run("metrics", str(p), "-o", str(tmp_path / "no" / "dir.prom")), "dir.prom")
    p.write_text('{"schema": "other"}')
    assert_one_line_error(run("metrics", str(p)), "no metrics")


def test_malformed_results_are_one_line(tmp_path):
    import json

    from tests_cli_helpers import assert_one_line_error, run
    p = tmp_path / "r.json"
    for doc, needle in (({"schema": "gpucluster-bench-collective/v1", "op": "all_reduce", "world_size": 2,
                          "rows": [{"size_bytes": "big"}]}, "rows[0]"),
                        ({"schema": "gpucluster-bench-storage/v1", "path": "/x", "write_gbps": "fast",
                          "read_gbps": 1}, "write_gbps"),
                        ({"schema": "gpucluster-simulation/v1", "utilization": {"busy": "x"}}, "utilization.busy"),
                        ({"schema": "gpucluster-simulation/v1", "utilization": 5}, "utilization: must be a mapping"),
                        ({"schema": "gpucluster-simulation/v1", "gpu_hours": {"useful": float("nan")}},
                         "gpu_hours.useful: must be a finite number >= 0"),
                        ({"schema": "gpucluster-simulation/v1", "classes": {"a": {"wait_s": {"p50": -5}}}},
                         "classes.a.wait_s.p50"),
                        ({"schema": "gpucluster-simulation/v1", "scenario": "s\x1b]0;T\x07"}, "scenario: must be text")):
        p.write_text(json.dumps(doc))
        assert_one_line_error(run("metrics", str(p)), needle)


def test_openmetrics_file_parses_with_the_reference_parser(tmp_path):
    """`metrics -o FILE --openmetrics` is OpenMetrics by the Prometheus client's strict parser
    (which refuses a missing `# EOF`, a counter family named with _total, a unit that is not
    the name's suffix)."""
    import json

    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    from tests_cli_helpers import run
    res = {"schema": "gpucluster-bench-collective/v1", "op": "all_gather", "backend": "gloo", "world_size": 2,
           "nodes": 1, "rows": [{"size_bytes": 1024, "count": 128, "busbw_gbps": 1.5, "algbw_gbps": 1.5,
                                 "time_us": 10.0, "wrong": 0, "placement": "out-of-place",
                                 "in_place": {"busbw_gbps": 2.0, "algbw_gbps": 2.0, "time_us": 8.0, "wrong": 0}}]}
    p, out = tmp_path / "r.json", tmp_path / "r.om"
    p.write_text(json.dumps(res))
    run("metrics", str(p), "-o", str(out), "--openmetrics", check_rc=0)
    fams = {f.name: f for f in parser.text_string_to_metric_families(out.read_text())}
    busbw = fams["gpucluster_collective_busbw_bytes_per_second"]
    assert busbw.unit == "bytes_per_second" and len(busbw.samples) == 2
    with pytest.raises(ValueError):          # the Prometheus text format is not OpenMetrics
        list(parser.text_string_to_metric_families(run("metrics", str(p), check_rc=0).stdout))
    counter = Family("gpucluster_jobs_finished_total", "counter", "Jobs").add(3)
    assert [f.name for f in parser.text_string_to_metric_families(render([counter], openmetrics=True))] == \
        ["gpucluster_jobs_finished"]
