"""Where the project keeps what it generates (synthetic videos, tiny models, benchmark media)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$PARAVT_CACHE`` or ``~/.cache/paravt-gym``, created if absent."""
    root = Path(os.environ.get("PARAVT_CACHE", Path.home() / ".cache" / "paravt-gym"))
    root.mkdir(parents=True, exist_ok=True)
    return root
