"""The CLI coerces plain str/int/float/bool options itself (cli/app.py `_PlainCoercion`) instead of
through typer's pydantic TypeAdapters, for start-up time: every value must come out as typer's own
coercion gives it, and every bad value must fail with typer's own message."""

from typing import Any

import pytest

from gpucluster.cli.app import _PlainCoercion, load_command

typer_coercion = pytest.importorskip("typer._coercion", reason="a typer without per-option runtime coercion")


def _train() -> Any:
    return load_command("plan").get_command(None, "train")


def _train_params() -> dict[str, Any]:
    return {p.name: p for p in _train().params}


def test_plan_trains_plain_options_skip_typers_adapters() -> None:
    params = _train_params()
    if not hasattr(params["nodes"], "_runtime_param"):
        pytest.skip("this typer has no per-parameter runtime coercion")
    for name in ("model", "gpu", "nodes", "global_batch", "top", "json_out", "dp_overlap"):
        assert isinstance(params[name]._runtime_param, _PlainCoercion), name


@pytest.mark.parametrize("name, values", [
    ("nodes", ["12", "007", "-3", "0", " 3", "3 ", "1_000", "3.0", "+4", "abc", "", "١٢", 5, 2.0, True, None]),
    ("model", ["llama3-8b", "", " x ", "H100:8", 3, None]),
    ("json_out", [True, False, None, "true", "no"]),
    ("dp_overlap", [True, False, None, "1"]),
])
def test_same_values_and_errors_as_typers_own(name: str, values: list[Any]) -> None:
    param = _train_params()[name]
    if not isinstance(getattr(param, "_runtime_param", None), _PlainCoercion):
        pytest.skip("this typer keeps its own coercion")
    from typer._click import Context

    ctx = Context(_train())
    own = typer_coercion.build_runtime_param(param.type_descriptor)

    def outcome(runtime: Any, value: Any) -> tuple[str, Any]:
        try:
            out = runtime.coerce(value, param=param, ctx=ctx)
        except Exception as exc:  # the same exception, with the same message
            return type(exc).__name__, exc.format_message()  # type: ignore[attr-defined]
        return type(out).__name__, out

    for value in values:
        # A fresh _PlainCoercion each time: one that fell back to typer's adapter keeps it.
        plain = _PlainCoercion(param, param.type_descriptor.annotation)
        assert outcome(plain, value) == outcome(own, value), value
