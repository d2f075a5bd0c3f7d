"""Hardware catalog: GPUs, links, NICs, switches and CPUs, as data files with sources."""

from gpucluster.catalog.registry import catalog, parse_accelerator

__all__ = ["catalog", "parse_accelerator"]
