"""Shared test fixtures. Nothing here downloads anything: videos are generated, models built locally."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def tvshim_on_path():
    """Put ../shared/bench/tvshim (a torchvision stand-in) on sys.path so qwen-vl-utils imports."""
    shim = SHARED / "bench" / "tvshim"
    if not shim.is_dir():
        pytest.skip(f"torchvision stand-in not found at {shim}")
    if str(shim) not in sys.path:
        sys.path.insert(0, str(shim))
    return shim
