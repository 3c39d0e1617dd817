"""Where the project keeps what it generates (synthetic videos, tiny models, benchmark media)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$PARAVT_CACHE`` or ``~/.cache/paravt-gym``, not created: where things are or will be (a plan that
    writes nothing names paths under it)."""
    return Path(os.environ.get("PARAVT_CACHE", Path.home() / ".cache" / "paravt-gym"))


def cache_dir() -> Path:
    """``cache_root()``, created if absent."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root
