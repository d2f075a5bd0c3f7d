"""The HTML reports in a real headless Chromium (Debian's chromium + chromium-driver, driven
by selenium): the page loads with no console errors, every plot renders an SVG with
content, and a cluster named <script>alert(1)</script> shows as text.

`make test` (and so CI) installs chromium when it is missing; without it these tests skip."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "gpucluster"
XSS = "<script>alert(1)</script>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="Chromium or chromedriver is not installed (Debian: apt-get install chromium chromium-driver; "
           "`make test` installs them)")


def _gpucluster(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def xss_cluster(tmp_path_factory) -> Path:
    text = (ROOT / "examples/h200-256-100gbe.yaml").read_text()
    text = "\n".join(f"name: '{XSS}'" if line.startswith("name:") else line for line in text.splitlines())
    path = tmp_path_factory.mktemp("spec") / "xss.yaml"
    path.write_text(text + "\n")
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory, xss_cluster) -> dict[str, Path]:
    """One report per command that has --html, the cluster named with the XSS string where it takes one."""
    out = tmp_path_factory.mktemp("reports")
    cmds = {
        "plan-train": ["plan", "train", "--cluster", str(xss_cluster), "--model", "llama3-70b", "--tokens", "2T"],
        "plan-serve": ["plan", "serve", "--model", "llama3-8b", "--rate", "20", "--gpu", "H100:8",
                       "--slo-ttft", "500ms", "--compare", "A100"],
    }
    cmds.update(EXTRA_REPORTS(xss_cluster))
    paths = {}
    for name, args in cmds.items():
        path = out / f"{name}.html"
        _gpucluster(*args, "--html", str(path))
        assert path.is_file(), name
        paths[name] = path
    return paths


def EXTRA_REPORTS(cluster: Path) -> dict[str, list[str]]:
    """Reports of the commands beyond the planners (kept in one place as commands gain --html)."""
    scenario = cluster.parent / "tiny-scenario.yaml"
    scenario.write_text(
        f"name: '{XSS}'\ncluster: {ROOT / 'examples/h100-64-ib.yaml'}\nhorizon_days: 3\nseed: 2\npolicy: fifo\n"
        "workloads:\n  - kind: training\n    name: team\n    arrivals: {per_day: 6}\n"
        "    gpus: {dist: choice, values: [1, 4, 8, 16]}\n"
        "    duration_hours: {dist: lognormal, median: 3, sigma: 1.0, max: 48}\n")
    return {
        "cost": ["cost", str(cluster)],
        "reliability": ["reliability", str(cluster), "--interval", "30m"],
        "check": ["check", str(cluster), "--job", "examples/jobs/bad-train.sbatch"],
        "simulate-compare": ["simulate", "compare", str(scenario), "--policies", "fifo,sjf"],
        "comm": ["comm", "--cluster", str(cluster), "--gpus", "64"],
        "sweep": ["sweep", "examples/sweeps/plan-grid.yaml", "--workers", "2"],
        "diagnose": ["diagnose", "--cluster", "examples/h100-64-ib.yaml", str(_bench_result(cluster.parent))],
    }


def _bench_result(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests/report"))
    from test_report_cli import bench_result
    return bench_result(folder)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    os.environ.setdefault("SE_OFFLINE", "true")      # selenium must not try to download a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    assert CHROMIUM is not None    # the module skips without it
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,900",
                 f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=opts, service=Service(DRIVER))
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Chromium did not start: {str(exc).splitlines()[0]}")
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _load(browser, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")                       # drop what an earlier page logged
    browser.get(path.as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('div.plot'))"
        ".every(function (d) { return d.getAttribute('data-rendered') === '1'; })"))


def test_every_report_loads_without_console_errors_and_every_plot_renders(browser, reports):
    for name, path in reports.items():
        _load(browser, path)
        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, f"{name}: {severe}"
        plots = browser.execute_script("""
            return Array.from(document.querySelectorAll('div.plot')).map(function (d) {
              var svg = d.querySelector('svg.main-svg');
              var marks = d.querySelectorAll('g.trace path, g.trace rect, g.points path, path.point, g.bars path');
              return {id: d.getAttribute('data-figure'), svg: !!svg, marks: marks.length,
                      width: svg ? svg.getBoundingClientRect().width : 0};
            });""")
        assert plots or name == "check", f"{name}: no plots"
        for p in plots:
            assert p["svg"] and p["marks"] > 0 and p["width"] > 300, f"{name}: {p}"


def test_the_script_in_a_cluster_name_shows_as_text(browser, reports):
    from selenium.common.exceptions import NoAlertPresentException

    for name, path in reports.items():
        if name in ("plan-serve", "diagnose", "comm", "sweep"):   # they name no cluster (comm names its file)
            continue
        _load(browser, path)
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018  (no alert opened)
        h1 = browser.execute_script("return document.querySelector('h1').textContent")
        assert XSS in h1, name
        assert browser.execute_script("return document.title").count(XSS) == 1, name
        # Only our own scripts: the library (only when there are figures), one spec per figure,
        # the boot code.
        n_scripts = browser.execute_script("return document.scripts.length")
        n_plots = browser.execute_script("return document.querySelectorAll('div.plot').length")
        assert n_scripts == n_plots + (2 if n_plots else 1), name


def test_user_strings_inside_plots_show_as_typed(browser, tmp_path):
    from gpucluster.report.figures import step_breakdown
    from gpucluster.report.html import Report, write_report

    name = XSS + " & <b>bold</b>"
    fig = step_breakdown({"compute": 1.0, "dp_comm": 0.5}, {"compute": name, "dp_comm": "dp"}, 1.5)
    path = write_report(Report(title=name, figures=[fig]), str(tmp_path / "labels.html"))
    _load(browser, path)
    ticks = browser.execute_script(
        "return Array.from(document.querySelectorAll('div.plot g.ytick text')).map(function (t) "
        "{ return t.textContent; })")
    assert name in ticks, ticks
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
