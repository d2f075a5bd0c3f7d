"""Optional heavy dependencies, imported only when a command needs them."""

from __future__ import annotations

from gpucluster.errors import UserError


def require_torch():
    try:
        import torch
        import torch.distributed
    except ImportError:
        raise UserError("this benchmark needs PyTorch: pip install 'gpucluster[torch]'") from None
    return torch


def require_ray():
    try:
        import ray
    except ImportError:
        raise UserError("Ray sweeps need Ray: pip install 'gpucluster[ray]'") from None
    return ray
