"""`gpucluster bench ... --json`: schemas gpucluster-bench-{collective,gemm,hbm,storage}/v1.

The collective result is read back by `diagnose` and `metrics` through
bench/result.py CollectiveResult, which is its model here too (results carry more fields than
are read: kept, not refused)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpucluster.bench.result import CollectiveResult as BenchCollectiveDocument
from gpucluster.documents.base import Document, Num, Strict

__all__ = ["BenchCollectiveDocument", "BenchGemmDocument", "BenchHbmDocument", "BenchStorageDocument"]


class GemmRow(Strict):
    m: int
    n: int
    k: int
    precision: str
    time_s: Num
    tflops: Num


class _Calibrated(Document):
    OMIT_NONE = ("calibration",)


class BenchGemmDocument(_Calibrated):
    schema_: Literal["gpucluster-bench-gemm/v1"] = Field("gpucluster-bench-gemm/v1", alias="schema")
    device: str
    rows: list[GemmRow]
    calibration: str | None = Field(None, description="the calibration file written (--write-calibration)")


class BenchHbmDocument(_Calibrated):
    schema_: Literal["gpucluster-bench-hbm/v1"] = Field("gpucluster-bench-hbm/v1", alias="schema")
    size_bytes: int
    time_s: Num
    tbps: Num
    device: str
    calibration: str | None = Field(None, description="the calibration file written (--write-calibration)")


class BenchStorageDocument(Document):
    schema_: Literal["gpucluster-bench-storage/v1"] = Field("gpucluster-bench-storage/v1", alias="schema")
    path: str
    size_bytes: int
    block_bytes: int
    write_gbps: Num
    write_s: Num
    read_gbps: Num
    read_s: Num
    read_maybe_cached: bool
