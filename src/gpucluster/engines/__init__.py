"""Engines the tool hands work to: Slurm, Ray and local process pools for sweeps; OpenMetrics text."""
