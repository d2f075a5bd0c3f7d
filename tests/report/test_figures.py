"""Every figure names its units on each titled axis and has a caption that says what to conclude."""

import inspect
import re

import pytest

from gpucluster.report import figures as F
from gpucluster.report import figures_ops as O
from gpucluster.report.html import Figure

LABELS = {"compute": "compute", "dp_comm": "data-parallel", "pp_bubble": "bubble"}
TS = {"t_hours": [1.0, 2.0, 3.0], "allocation": [0.5, 0.7, 0.9], "busy": [0.4, 0.6, 0.8]}

SAMPLES = {
    "step_breakdown": lambda: F.step_breakdown({"compute": 1.0, "dp_comm": 0.3, "pp_bubble": 0.1}, LABELS, 1.4),
    "memory_per_gpu": lambda: F.memory_per_gpu([("tp=8", [("weights", 20 * 2**30), ("activations", 40 * 2**30)],
                                                 80 * 2**30)]),
    "top_layouts": lambda: F.top_layouts([("a", {"compute": 1.0, "dp_comm": 0.1}, 0.5),
                                          ("b", {"compute": 1.0, "dp_comm": 0.3}, 0.45)], LABELS),
    "scaling_curve": lambda: F.scaling_curve([{"gpus": 64, "time_s": 8e6, "cost_usd": 2e6, "layout": "x"},
                                              {"gpus": 128, "time_s": 4.4e6, "cost_usd": 2.2e6, "layout": "y"}], 64),
    "serving_curve": lambda: F.serving_curve([(100, 0.2, 0.03), (500, 0.3, 0.04), (900, 1.0, 0.06)],
                                             slo_ttft_s=0.5, slo_tpot_s=0.05, operating=(500, 0.3, 0.04),
                                             replica="H100 TP4", binding="SLO (TPOT p99)"),
    "serving_options": lambda: F.serving_options([{"name": "H100 TP4", "usd_per_mtok": 2.0, "gpus": 40,
                                                   "ttft_p99_s": 0.2},
                                                  {"name": "H200 TP4", "usd_per_mtok": 2.4, "gpus": 32,
                                                   "ttft_p99_s": 0.2}]),
    "build_vs_rent": lambda: O.build_vs_rent([0, 12, 24, 36], [10e6, 12e6, 14e6, 16e6],
                                             {"on-demand": [0, 6e6, 12e6, 18e6]}, {"on-demand": 27.0}),
    "checkpoint_timeline": lambda: O.checkpoint_timeline(mtbf_s=6 * 3600, interval_s=1800, write_s=30,
                                                         restart_s=600, goodput=0.9, tier="lustre"),
    "goodput_vs_interval": lambda: O.goodput_vs_interval([{"name": "lustre", "write_s": 30, "restart_s": 600,
                                                           "optimal_s": 1200, "goodput": 0.9}], 6 * 3600, 1800),
    "mtbf_by_size": lambda: O.mtbf_by_size([(8, 2000.0), (1024, 20.0), (16384, 1.2)], "llama3", [(2048, 6.0)]),
    "sim_utilization": lambda: O.sim_utilization({"fifo": TS, "backfill": TS}),
    "jct_distribution": lambda: O.jct_distribution({"fifo": [3600.0, 7200.0, 36000.0], "sjf": [1800.0, 3600.0]}),
    "bandwidth_curves": lambda: O.bandwidth_curves("all_reduce", [(2**20, 50.0), (2**30, 400.0)],
                                                   [(2**20, 40.0), (2**30, 380.0)], where="on 16 GPUs"),
    "sweep_field": lambda: O.sweep_field("best.step_s", ["model=a", "model=b"], [4.8, 8.9]),
}

UNIT = re.compile(r"\([^()]*[A-Za-z%$][^()]*\)")


def _public_figure_functions():
    for mod in (F, O):
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ == mod.__name__ and inspect.signature(fn).return_annotation in (Figure, "Figure"):
                yield name


def test_every_figure_function_has_a_sample():
    assert set(_public_figure_functions()) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_figure_has_units_and_a_caption(name):
    f = SAMPLES[name]()
    assert f.title and f.key
    assert len(f.caption) > 60 and re.search(r"\d", f.caption), f.caption
    layout = f.fig.to_plotly_json()["layout"]
    titled = 0
    for key, axis in layout.items():
        if not re.fullmatch(r"[xy]axis\d*", key):
            continue
        text = (axis.get("title") or {}).get("text") or ""
        if text:
            titled += 1
            assert UNIT.search(text), f"{name}: axis {key} title {text!r} has no unit in parentheses"
    assert titled >= 1, f"{name}: no axis title"
    assert f.fig.data, f"{name}: no traces"


def test_empty_inputs_give_a_caption_not_a_crash():
    assert "No" in F.memory_per_gpu([]).caption
    assert "No job" in O.jct_distribution({"fifo": []}).caption
    assert "no samples" in O.sim_utilization({"fifo": {}}).caption
    assert "Only one" in F.scaling_curve([{"gpus": 8, "time_s": 1e6, "cost_usd": None}], 8).caption


def test_sweep_units_come_from_the_field_names():
    assert O.field_unit("best.step_s") == "s" and O.field_unit("gpu_hours") == "GPU-hours"
    assert O.field_unit("best.mfu") == "fraction, 0-1" and O.field_unit("cost.total_usd") == "$"
