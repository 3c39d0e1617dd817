"""Where the project keeps what it generates (synthetic videos, tiny models, benchmark media)."""

from __future__ import annotations

from pathlib import Path


def cache_root() -> Path:
    """``$PARAVT_CACHE`` or ``~/.cache/paravt-gym``, not created: where things are or will be (a plan that
    writes nothing names paths under it)."""
    from .environ import directory

    return Path(directory("PARAVT_CACHE") or Path.home() / ".cache" / "paravt-gym")


def cache_dir() -> Path:
    """``cache_root()``, created if absent."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root
