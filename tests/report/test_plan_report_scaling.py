"""The scaling curve says which cluster sizes it left out, and why (it used to drop them silently)."""

import gpucluster
from gpucluster.report.plan_report import scaling_points, train_report


def test_sizes_without_a_layout_are_named_under_the_scaling_table():
    # tp=8 x pp=4 needs 32 GPUs: the curve's 8- and 16-GPU points cannot hold it.
    plan = gpucluster.plan_train("llama3-8b", gpu="H100:8", nodes=8, tokens="100B", layout="tp=8,pp=4")
    points, left_out = scaling_points(plan, plan.fixed)
    assert [p["gpus"] for p in points] == [32, 64, 128, 256]
    assert left_out == ["8 GPUs (no layout fits in memory)", "16 GPUs (no layout fits in memory)"]
    report = train_report(plan, plan.meta(), fixed=plan.fixed)
    scale = next(t for t in report.tables if t.title.startswith("Scaling"))
    assert scale.note == "left out: " + "; ".join(left_out)
