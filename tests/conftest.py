import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPUCLUSTER_SHARED", ROOT.parent / "shared"))


@pytest.fixture
def shared_dir() -> Path:
    if not (SHARED / "validation").is_dir():
        pytest.skip(f"shared/ not found at {SHARED}")
    return SHARED
