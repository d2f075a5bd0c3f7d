"""gpucluster: design, simulate and validate GPU clusters for AI."""

__version__ = "0.1.0"
