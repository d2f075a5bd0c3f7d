"""GEMM/HBM skip clearly without a GPU; storage measures; calibration goes into a catalog copy
that GPUCLUSTER_CATALOG loads, leaving the shipped files untouched."""

import json
import os
import subprocess

import pytest

from tests_cli_helpers import EXE, assert_one_line_error, run

torch = pytest.importorskip("torch")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gemm_and_hbm_skip_on_cpu():
    for cmd in ("gemm", "hbm"):
        p = run("bench", cmd, "--json", check_rc=0)
        assert "no GPU" in json.loads(p.stdout)["skipped"]
    assert_one_line_error(run("bench", "gemm", "--precision", "fp4"), "--precision")


def test_storage(tmp_path):
    p = run("bench", "storage", str(tmp_path), "--size", "8M", "--block", "1M", "--json",
            "--metrics", str(tmp_path / "m.prom"), check_rc=0)
    res = json.loads(p.stdout)
    assert res["size_bytes"] == 8 << 20 and res["write_gbps"] > 0 and res["read_gbps"] > 0
    assert not list(tmp_path.glob(".gpucluster-storage-*"))
    assert 'direction="write"' in (tmp_path / "m.prom").read_text()
    assert_one_line_error(run("bench", "storage", str(tmp_path / "nope")), "not a directory")


def test_calibration_copy(tmp_path):
    from gpucluster.bench.calibration import write_calibration
    from gpucluster.catalog.registry import DATA_DIR
    shipped = (DATA_DIR / "gpus" / "H100-SXM5-80GB.yaml").read_text()
    dest = tmp_path / "cat"
    rows = [{"m": 4096, "n": 4096, "k": 4096, "precision": "bf16", "tflops": 612.34}]
    p = write_calibration(str(dest), "H100", gemm_rows=rows, hbm_tbps=2.9)
    write_calibration(str(dest), "H100", gemm_rows=[{**rows[0], "tflops": 600.0}])  # replaces, not appends
    assert (DATA_DIR / "gpus" / "H100-SXM5-80GB.yaml").read_text() == shipped
    code = ("from gpucluster.catalog import catalog; g = catalog.gpus.get('H100'); "
            "import json; print(json.dumps([[p.precision, p.tflops.value if hasattr(p.tflops, 'value') else p.tflops, "
            "getattr(p, 'source', None)] for p in g.efficiency.gemm if p.m == 4096 and p.precision == 'bf16']))")
    out = subprocess.run([str(EXE.parent / "python"), "-c", code], capture_output=True, text=True,
                         env={**os.environ, "GPUCLUSTER_CATALOG": str(dest)}, timeout=60)
    assert out.returncode == 0, out.stderr
    from gpucluster.bench.calibration import SOURCE
    pts = [pt for pt in json.loads(out.stdout) if pt[2] == SOURCE]  # the shipped file has its own 4096^3 point
    assert len(pts) == 1 and abs(pts[0][1] - 600.0) < 1e-9
    assert "hbm_fraction" in p.read_text()
    from gpucluster.errors import UserError
    with pytest.raises(UserError):
        write_calibration(str(DATA_DIR), "H100", hbm_tbps=1.0)
