"""The vLLM stand-in (``vllm_standin``) for the tests that import OpenRLHF's rollout modules, which import vllm."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).with_name("vllm_standin")


@pytest.fixture(scope="module")
def vllm_standin() -> Path:
    """``import vllm`` gives the stand-in while the module's tests run (vLLM is GPU-only; OpenRLHF's
    ``vllm_engine`` and ``samples_generator`` import it at module level). Returns the folder to put on the path
    of other processes (Ray's workers)."""
    sys.path.insert(0, str(STANDIN))
    try:
        yield STANDIN
    finally:
        sys.path.remove(str(STANDIN))
