"""The layers hold: no module imports one of a higher layer (imports inside functions count too).

From docs/development.md, lowest first (DESIGN.md's specs -> pure model -> engines -> interfaces):

0. leaves: gpucluster (the lazy API facade), units, errors, files, registry, events (the event kernel),
   safe_text, and the YAML loader (specs.loader, specs.safe_yaml)
1. catalog, specs (data)
2. model (pure functions)
3. plan, sim, validate, check, generate, bench, documents (the engines of DESIGN.md's picture)
4. engines (Slurm, Ray sweeps)
5. report (terminal, HTML)
6. cli

A module may import its own layer and the ones below.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LEAVES = ("units", "errors", "files", "registry", "events", "safe_text", "jsonable", "specs.loader", "specs.safe_yaml")
LAYERS = {**{f"gpucluster.{m}": 0 for m in LEAVES}, "gpucluster": 0,
          "gpucluster.catalog": 1, "gpucluster.specs": 1, "gpucluster.model": 2,
          **{f"gpucluster.{m}": 3 for m in ("plan", "sim", "validate", "check", "generate", "bench", "documents")},
          "gpucluster.engines": 4, "gpucluster.report": 5, "gpucluster.cli": 6}
# Known exceptions, each with why it is still here; the list only shrinks.
KNOWN: set[tuple[str, str]] = set()


def layer(module: str) -> int:
    """The layer of the longest prefix of `module` in LAYERS."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and docs/development.md)")


def imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            name = ".".join(p for p in (base, node.module or "") if p)
            # `from gpucluster.x import y`: y may be a module, so the import reaches gpucluster.x.y
            out |= {name} | {f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in MODULES}
    return {m for m in out if m == "gpucluster" or m.startswith("gpucluster.")}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


MODULES = {module_of(p) for p in SRC.rglob("*.py")}


def test_no_module_imports_a_higher_layer():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        me = module_of(path)
        for other in sorted(imports(path, me)):
            if layer(other) > layer(me) and (me, other) not in KNOWN:
                wrong.append(f"{path.relative_to(SRC)}: {me} (layer {layer(me)}) imports {other} "
                             f"(layer {layer(other)})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_check_sees_lazy_and_relative_imports(tmp_path):
    p = tmp_path / "gpucluster" / "model" / "m.py"
    p.parent.mkdir(parents=True)
    p.write_text("def f():\n    from gpucluster.cli import app\n    from ..report import html\n")
    assert imports(p, "gpucluster.model.m") >= {"gpucluster.cli", "gpucluster.report"}
    assert layer("gpucluster.cli.app") > layer("gpucluster.model.m")
