"""Calibrate the prediction intervals (src/gpucluster/catalog/data/intervals.yaml) from the
cross-validated errors of every public file, report their coverage, and regenerate the
headline-error block of docs/validation.md.

    python benchmarks/calibrate_intervals.py [--check] [--json] [--no-docs] [--jobs=N]

Training (training-public, training-vtrain-single-public, training-sharded-public): for each
source, benchmarks/cross_validate.py's `fit` runs on every *other* source and the left-out
source is predicted; the residual (measured / predicted step time) is tagged with the regime
the case falls in relative to the other sources (model/regime.py: a chip, framework, kernel
or scale no other source has is "not validated"). The same is done leaving one framework out
and one chip out (docs only: the errors, per group, never pooled alone).

Serving (inference-serving-public, inference-public): the serving predictor as shipped
(validate/inference_predictor.py; whatever constants it fits are fitted on these files, so
its residuals are in-sample for those constants), one residual per measured metric.

Coverage is cross-validated: the interval of a case uses the residuals of the other sources
only, then the case's residual is checked against it. The shipped table uses every residual.
Takes about 35 s of CPU (13 leave-one-group-out fits, on --jobs processes, default 2).
`--check` exits 1 when intervals.yaml differs from what the files give now.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import cross_validate as cv  # noqa: E402  (owned by the training model's fit; only its functions are used)

from gpucluster.catalog import catalog  # noqa: E402
from gpucluster.catalog.intervals import PATH  # noqa: E402
from gpucluster.model.intervals import case_point  # noqa: E402
from gpucluster.model.regime import (DEFAULT_ENGINE, DEFAULT_FRAMEWORK, SERVING_FEATURES, TRAINING_FEATURES, Validated,  # noqa: E402
                                     serving_features, training_features)
from gpucluster.model.uncertainty import (LEVEL, MIN_CASES, MIN_SOURCES, Residual, build_bands, coverage,  # noqa: E402
                                          factors)
from gpucluster.specs.validation_case import Case  # noqa: E402
from gpucluster.validate.runner import case_defaults, load_file, stack_defaults  # noqa: E402

SHARED = ROOT.parent / "shared" / "validation"
TRAINING_FILES = ("training-public.yaml", "training-vtrain-single-public.yaml", "training-sharded-public.yaml")
SERVING_FILES = ("inference-serving-public.yaml", "inference-public.yaml")
DOC = ROOT / "docs" / "validation.md"
BEGIN, END = "<!-- calibrate_intervals:begin -->", "<!-- calibrate_intervals:end -->"
# Each unvalidated feature a regime is pooled over widens the band by this factor in log space
# (an estimate: half again as wide; the coverage of the pooled cases checks it).
WIDEN = 1.5
WIDEN_WHY = ("each feature on its unvalidated side that a regime is pooled over (no cross-validated case of its own) "
             "widens the band x1.5 in log space: an estimate, checked by the coverage of such cases in "
             "leave-one-source-out (docs/validation.md)")
# With no residual at all (cannot happen while any public file is read, but the table must hold a
# band for it): the model's worst leave-one-source-out source median before issue 21 was ~60%
# (fms-fsdp); an interval of x0.6-x1.6 on the time.
FALLBACK = {"lo": 0.6, "hi": 1.6, "why": "no cross-validated case: x0.6-x1.6 on the predicted time, about the worst "
                                        "source's median error before calibration (an estimate)"}
SERVING_METRIC = {"tokens_per_s": ("throughput", -1), "tokens_per_s_per_gpu": ("throughput", -1),
                  "latency_s": ("throughput", 1), "ttft_s": ("ttft", 1), "tpot_s": ("tpot", 1)}


def training_point(c: Case) -> dict[str, Any]:
    return case_point(c, case_defaults(c))


def serving_point(c: Case) -> dict[str, Any]:
    return case_point(c, stack_defaults())


def _get(section: Any, name: str) -> Any:
    if section is None:
        return None
    return section.get(name) if isinstance(section, dict) else getattr(section, name, None)


def _load(names: tuple[str, ...], kind: str) -> list[Case]:
    return [c for n in names for c in load_file(SHARED / n).cases if c.kind == kind]


def _framework(c: Case) -> str:
    return training_point(c)["framework"]


def _chip(c: Case) -> str:
    return catalog.gpus.get((c.hardware or {})["gpu"]).name


GROUPINGS: dict[str, Callable[[Case], str]] = {"source": cv.source_key, "framework": _framework, "chip": _chip}
_CASES: list[Case] = []   # the cases the worker processes fit on (inherited through fork)


def _fold(task: tuple[str, str]) -> dict[str, float]:
    """Fit on every group but one (grouping, group) and predict the left-out one: case id -> error."""
    by, g = task
    group = GROUPINGS[by]
    held = [c for c in _CASES if group(c) == g]
    rest = [c for c in _CASES if group(c) != g]
    fitted = cv.fit(rest)
    # cross_validate.fit returns what its errors() takes after the cases (a tuple today)
    return cv.errors(held, *fitted) if isinstance(fitted, tuple) else cv.errors(held, fitted)


def leave_one_out_all(cases: list[Case], jobs: int) -> dict[str, list[tuple[Case, float, dict[str, Any], Validated]]]:
    """For each grouping (source, framework, chip): (case, error, point, what the other groups cover)
    for every predicted case, its group left out. The folds run on `jobs` processes."""
    _CASES[:] = cases
    points = {c.id: training_point(c) for c in cases}
    tasks = [(by, g) for by, group in GROUPINGS.items() for g in sorted({group(c) for c in cases})]
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_fold, tasks))
    else:
        results = [_fold(t) for t in tasks]
    out: dict[str, list[tuple[Case, float, dict[str, Any], Validated]]] = {by: [] for by in GROUPINGS}
    for (by, g), errs in zip(tasks, results, strict=True):
        group = GROUPINGS[by]
        covered = Validated.of(points[c.id] for c in cases if group(c) != g)
        out[by] += [(c, errs[c.id], points[c.id], covered) for c in cases if group(c) == g and c.id in errs]
    return out


def cross_validated_coverage(residuals: list[Residual], order: tuple[str, ...]) -> dict[str, Any]:
    """Each case's interval from the other sources' residuals only; coverage per source and overall."""
    rows, unvalidated = [], []
    for src in sorted({r.source for r in residuals}):
        bands = build_bands([r for r in residuals if r.source != src], order)
        for r in residuals:
            if r.source == src:
                lo, hi, _, found = factors(bands, r.features, order, WIDEN, (float(str(FALLBACK["lo"])), float(str(FALLBACK["hi"]))))
                rows.append((src, r.ratio, lo, hi))
                if found.dropped_unvalidated or found.band is None:
                    unvalidated.append(("pooled over an unvalidated feature", r.ratio, lo, hi))
    out = coverage(rows)
    out["unvalidated"] = coverage(unvalidated)["all"]
    return out


def _errors_by(rows: list[tuple[Case, float, dict[str, Any], Validated]], key: Callable[[Case], str]) -> dict[str, Any]:
    groups: dict[str, list[float]] = defaultdict(list)
    for c, e, _, _ in rows:
        groups[key(c)].append(e)
    per = {g: cv.summary(v) for g, v in sorted(groups.items())}
    return {"by_group": per, "median_of_groups": statistics.median(p["median_abs_error"] for p in per.values())}


def training(cases: list[Case], jobs: int = 1) -> dict[str, Any]:
    folds = leave_one_out_all(cases, jobs)
    residuals = [Residual(c.id, cv.source_key(c), training_features(p, v), 1 / (1 + e))
                 for c, e, p, v in folds["source"]]
    return {"residuals": residuals, "validated": Validated.of(training_point(c) for c in cases),
            "coverage": cross_validated_coverage(residuals, TRAINING_FEATURES),
            "errors": {f"leave-one-{by}-out": _errors_by(folds[by], GROUPINGS[by]) for by in GROUPINGS}}


def serving(cases: list[Case]) -> dict[str, Any]:
    from gpucluster.validate.inference_predictor import predict_inference
    from gpucluster.validate.predictors import Unsupported

    points = {c.id: serving_point(c) for c in cases}
    raw: list[tuple[str, str, float, dict[str, Any]]] = []   # (metric group, case id + metric, ratio, point)
    sources = {c.id: cv.source_key(c) for c in cases}
    for c in cases:
        try:
            pred = predict_inference(c)
        except (Unsupported, ValueError):
            continue
        for metric, measured in c.measured.items():
            if metric in SERVING_METRIC and pred.get(metric):
                group, sign = SERVING_METRIC[metric]
                raw.append((group, c.id, (measured / pred[metric]) ** sign, points[c.id]))
    out: dict[str, Any] = {"validated": Validated.of(points.values()), "metrics": {}}
    for group in ("throughput", "ttft", "tpot"):
        rs = []
        for g, cid, ratio, p in raw:
            if g == group:
                others = Validated.of(points[k] for k in points if sources[k] != sources[cid])
                rs.append(Residual(cid, sources[cid], serving_features(p, others), ratio))
        out["metrics"][group] = {"residuals": rs,
                                 "coverage": cross_validated_coverage(rs, SERVING_FEATURES) if rs else None}
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _bands(residuals: list[Residual], order: tuple[str, ...]) -> list[dict[str, Any]]:
    return [b.to_json() for b in build_bands(residuals, order)]


def _cov_json(cov: dict[str, Any] | None) -> dict[str, Any] | None:
    if cov is None:
        return None
    r = lambda x: None if x is None else round(x, 4)  # noqa: E731
    pick = lambda s: None if s is None else {"cases": s["cases"], "coverage": r(s["coverage"]),  # noqa: E731
                                             "median_half_width": r(s["median_half_width"])}
    return {"all": pick(cov["all"]), "median_of_sources": r(cov["median_of_groups"]),
            "unvalidated": pick(cov["unvalidated"]), "by_source": {g: pick(s) for g, s in cov["by_group"].items()}}


def table(tr: dict[str, Any], sv: dict[str, Any]) -> dict[str, Any]:
    files = [f"shared/validation/{n}" for n in TRAINING_FILES + SERVING_FILES]
    return {
        "schema": "gpucluster-intervals/v1", "level": LEVEL, "min_cases": MIN_CASES, "min_sources": MIN_SOURCES,
        "widen": WIDEN, "widen_why": WIDEN_WHY,
        "source": {"method": ("weighted 10th/90th percentiles (every source weighing the same) of leave-one-source-out "
                              "residuals per regime, pooled up the hierarchy of model/regime.py below "
                              f"{MIN_CASES} cases or {MIN_SOURCES} sources; serving residuals are the shipped "
                              "serving predictor's (its fitted constants in-sample)"),
                   "script": "benchmarks/calibrate_intervals.py", "files": files, "commit": _commit(),
                   "generated": dt.date.today().isoformat()},
        "training": {"quantity": "step time (measured / predicted)", "features": list(TRAINING_FEATURES),
                     "default_stack": stack_defaults()["framework"] or DEFAULT_FRAMEWORK,
                     "validated": tr["validated"].to_json(), "fallback": FALLBACK,
                     "bands": _bands(tr["residuals"], TRAINING_FEATURES), "coverage": _cov_json(tr["coverage"])},
        "serving": {"features": list(SERVING_FEATURES), "default_stack": stack_defaults()["engine"] or DEFAULT_ENGINE,
                    "validated": sv["validated"].to_json()
                    | {"attention": [], "gpus": None, "seq_len": None}, "fallback": FALLBACK,
                    "metrics": {m: {"quantity": f"{m} as a time (measured / predicted; throughput inverted)",
                                    "bands": _bands(v["residuals"], SERVING_FEATURES),
                                    "coverage": _cov_json(v["coverage"])}
                                for m, v in sv["metrics"].items()}},
    }


def _pct(x: float | None, signed: bool = False) -> str:
    return "-" if x is None else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")


def _name(source: str, width: int = 60) -> str:
    s = source.replace("|", "/")
    return s if len(s) <= width else s[:width - 3].rstrip() + "..."


def docs_block(tr: dict[str, Any], sv: dict[str, Any]) -> str:
    lines = [BEGIN, "", "Generated by `python benchmarks/calibrate_intervals.py` (do not edit by hand). Error = "
             "predicted step time / measured - 1 (negative: predicted too fast); every group is predicted with "
             "the constants fitted on the other groups only.", ""]
    for name, res in tr["errors"].items():
        lines += [f"**Training, {name}** (median over groups of their median |error|: "
                  f"{_pct(res['median_of_groups'])})", ""]
        if len(res["by_group"]) == 1:
            lines += ["Only one group in the public files (cases that state none take the documented default): "
                      "leaving it out leaves nothing to fit, so these are the model's errors with every fitted "
                      "constant at its documented default.", ""]
        lines += ["| left out | cases | median abs error | mean signed error | max abs error |", "|---|---:|---:|---:|---:|"]
        for g, s in res["by_group"].items():
            lines.append(f"| {_name(g)} | {s['cases']} | {_pct(s['median_abs_error'])} | "
                         f"{_pct(s['mean_signed_error'], True)} | {_pct(s['max_abs_error'])} |")
        lines.append("")
    lines += [f"**{int(100 * LEVEL)}% interval coverage** (cross-validated: a case's interval uses the other "
              "sources' residuals only; target 75-90%, median half-width <= 25%)", "",
              "| predictions | left-out source | cases | coverage | median half-width |", "|---|---|---:|---:|---:|"]
    parts = [("training step time", tr["coverage"])] + [
        (f"serving {m}", v["coverage"]) for m, v in sv["metrics"].items() if v["coverage"]]
    for label, cov in parts:
        for g, s in cov["by_group"].items():
            lines.append(f"| {label} | {_name(g)} | {s['cases']} | {_pct(s['coverage'])} | "
                         f"{_pct(s['median_half_width'])} |")
        a, u = cov["all"], cov["unvalidated"]
        mean = statistics.fmean(s["coverage"] for s in cov["by_group"].values())
        lines.append(f"| {label} | **all cases** (mean over sources {_pct(mean)}, median {_pct(cov['median_of_groups'])}) "
                     f"| {a['cases']} | **{_pct(a['coverage'])}** | {_pct(a['median_half_width'])} |")
        if u:
            lines.append(f"| {label} | of which pooled over an unvalidated feature, or the fallback | {u['cases']} | "
                         f"{_pct(u['coverage'])} | {_pct(u['median_half_width'])} |")
    return "\n".join(lines + ["", END])


def _write_docs(block: str) -> None:
    text = DOC.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Headline errors and interval coverage\n\n" + block + "\n"
    DOC.write_text(text)


def dump_yaml(data: dict[str, Any]) -> str:
    head = ("# Calibrated prediction intervals: GENERATED by benchmarks/calibrate_intervals.py from the public\n"
            "# validation files (see `source`); do not edit by hand, re-run the script after a model change.\n"
            "# Read by src/gpucluster/catalog/intervals.py; the method is in src/gpucluster/model/uncertainty.py.\n")
    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return head + yaml.dump(data, Dumper=NoAliases, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    jobs = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--jobs=")), min(2, os.cpu_count() or 1))
    tr = training(_load(TRAINING_FILES, "training"), jobs)
    sv = serving(_load(SERVING_FILES, "inference"))
    data = table(tr, sv)
    if "--json" in argv:
        print(json.dumps({"training": data["training"]["coverage"], "serving": {
            m: v["coverage"] for m, v in data["serving"]["metrics"].items()},
            "errors": tr["errors"]}, indent=1))
    text = dump_yaml(data)
    if "--check" in argv:
        old = PATH.read_text() if PATH.is_file() else ""
        strip = lambda s: [ln for ln in s.splitlines() if not ln.strip().startswith(("commit:", "generated:"))]  # noqa: E731
        same = strip(old) == strip(text)
        print(f"{PATH}: {'up to date' if same else 'out of date: run python benchmarks/calibrate_intervals.py'}")
        return 0 if same else 1
    PATH.write_text(text)
    if "--no-docs" not in argv:
        _write_docs(docs_block(tr, sv))
    c = data["training"]["coverage"]
    print(f"wrote {PATH.relative_to(ROOT)}: training coverage {_pct(c['all']['coverage'])} of {c['all']['cases']} "
          f"cases (median over sources {_pct(c['median_of_sources'])}), median half-width "
          f"{_pct(c['all']['median_half_width'])}")
    for m, v in data["serving"]["metrics"].items():
        if v["coverage"]:
            a = v["coverage"]["all"]
            print(f"  serving {m}: coverage {_pct(a['coverage'])} of {a['cases']}, half-width "
                  f"{_pct(a['median_half_width'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
