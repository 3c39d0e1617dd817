"""Engine imports for the adapter tests: skipped where the engine is not installed (the default test environment),
required in the engine's own environment (``nox -s engines`` sets ``PARAVT_ENGINE``), where a skip would hide
exactly what that environment exists to check."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def engine_import(engine: str, module: str) -> ModuleType:
    """``module`` of ``engine``: imported (a failure fails) in that engine's environment, else importorskip."""
    if os.environ.get("PARAVT_ENGINE") == engine:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{engine} is tested in its own environment: nox -s \"engine(name='{engine}')\"")


def in_engine_env(engine: str) -> bool:
    return os.environ.get("PARAVT_ENGINE") == engine
