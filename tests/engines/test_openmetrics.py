import pytest

from gpucluster.engines.openmetrics import Family, collective_families, render, write_textfile


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


def test_collective_families_base_units():
    res = {"op": "all_reduce", "backend": "gloo", "world_size": 2, "nodes": 1,
           "rows": [{"size_bytes": 1024, "busbw_gbps": 1.5, "algbw_gbps": 1.5, "time_us": 10.0, "wrong": 0}]}
    text = render(collective_families(res))
    assert ('gpucluster_collective_busbw_bytes_per_second{op="all_reduce",backend="gloo",ranks="2",nodes="1",'
            'size_bytes="1024"} 1500000000') in text
    assert "gpucluster_collective_time_seconds{" in text
