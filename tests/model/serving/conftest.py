"""Shared replicas for the serving tests (built once: catalog and GEMM fits are cached)."""

import pytest

from gpucluster.catalog import serving as catalog_serving
from gpucluster.errors import UserError

from gpucluster.model.serving.kv_cache import Quant
from gpucluster.model.serving.step_time import Replica
from gpucluster.plan.fabric_from import from_flags
from gpucluster.specs.workload import load_model_spec


@pytest.fixture(scope="session")
def h100():
    return from_flags("H100:8", 1, "NDR400", None).fabric


@pytest.fixture(scope="session")
def a100():
    return from_flags("A100-SXM4-80GB:8", 1, "NDR400", None).fabric


@pytest.fixture(scope="session")
def llama8b():
    return load_model_spec("llama3-8b")


@pytest.fixture(scope="session")
def llama70b():
    return load_model_spec("llama3-70b")


@pytest.fixture(scope="session")
def rep8b(h100, llama8b):
    return Replica(llama8b, h100, 1, 1, Quant("bf16", "bf16"))


# One engine entry of engines.yaml with every required key; a test changes the one it checks.
ENGINE_ENTRY = {"title": "X", "kernel_data": None, "attention_kernel": "a", "cuda_graphs": True,
                "custom_allreduce": True, "chunked_prefill": False, "overlap_scheduling": False,
                "expert_precision": "as_weights", "host_step_us": 1, "launch_us": 1, "source": "s"}


@pytest.fixture
def registry_error(monkeypatch):
    """The UserError the engine registry raises for a table holding one engine `x`: ENGINE_ENTRY
    with `changes` (the registry's cache cleared before and after)."""
    def load(**changes: object) -> str:
        data = {"default": "x", "engines": {"x": ENGINE_ENTRY | changes}}
        monkeypatch.setattr(catalog_serving, "_load", lambda name: data)
        catalog_serving._engines.cache_clear()
        try:
            with pytest.raises(UserError) as exc:
                catalog_serving._engines()
            return str(exc.value)
        finally:
            monkeypatch.undo()
            catalog_serving._engines.cache_clear()
    return load
