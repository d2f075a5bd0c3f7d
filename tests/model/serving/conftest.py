"""Shared replicas for the serving tests (built once: catalog and GEMM fits are cached)."""

import pytest

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
