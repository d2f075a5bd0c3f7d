"""Write the example HTML reports (reports/) and their screenshots (docs/img/) with headless
Chromium, as the docs show them.

    python benchmarks/report_screenshots.py        # needs Debian's chromium (make browser)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "gpucluster"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--virtual-time-budget=15000"]

REPORTS = {   # name: (command, page height in pixels)
    "plan-train-70b-h200-256": (["plan", "train", "--cluster", "examples/h200-256-ndr400.yaml", "--model", "llama3-70b",
                                 "--tokens", "2T"], 2700),
    "plan-train-70b-100gbe": (["plan", "train", "--cluster", "examples/h200-256-100gbe.yaml", "--model", "llama3-70b",
                               "--tokens", "2T"], 1500),
    "plan-serve-70b": (["plan", "serve", "--model", "llama3-70b", "--rate", "50", "--gpu", "H100:8", "--slo-ttft",
                        "500ms", "--slo-tpot", "50ms", "--compare", "H200,A100"], 1900),
    "cost-512-h200": (["cost", "examples/seed-figures/tco-512-h200.yaml"], 1300),
    "reliability-256-nodes": (["reliability", "examples/h200-256-ndr400.yaml", "--nodes", "32", "--interval", "30m"],
                              2300),
    "comm-256": (["comm", "--cluster", "examples/h200-256-ndr400.yaml", "--gpus", "256"], 1100),
}


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: apt-get install chromium (or `make browser`)", file=sys.stderr)
        return 2
    (ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "docs/img").mkdir(parents=True, exist_ok=True)
    for name, (args, height) in REPORTS.items():
        html = ROOT / "reports" / f"{name}.html"
        subprocess.run([str(EXE), "--quiet", *args, "--html", str(html)], cwd=ROOT, check=True)
        png = ROOT / "docs/img" / f"report-{name}.png"
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size=1280,{height}",
                            f"--screenshot={png}", html.as_uri()], check=True, capture_output=True, timeout=120)
        print(f"{png.relative_to(ROOT)} <- {html.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
