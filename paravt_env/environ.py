"""Every ``PARAVT_*`` environment variable the project reads, parsed in one place and refused by name.

A variable is read where it is used, through the reader here (so a bad value is the same clear error wherever it
surfaces), and every ``paravt`` command checks them all before any work (``check_environment``): a typo in
``PARAVT_ORPHAN_GRACE_S`` is one line at the start, not a crash of a watcher thread an hour into a run. Benchmark
knobs (``PARAVT_BENCH_*``, ``PARAVT_FUZZ_*``) are read by the benchmarks themselves and are not listed here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any


class EnvironmentVariableError(ValueError):
    """A ``PARAVT_*`` variable holds a value the project cannot use; the message names it and the value."""


def _text(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None or not value.strip() else value.strip()


def positive_int(name: str, default: int | None = None) -> int | None:
    """``name`` as an integer >= 1 (``default`` when unset or empty)."""
    text = _text(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise EnvironmentVariableError(f"{name} must be an integer >= 1, got {text!r}")
    return value


def positive_seconds(name: str, default: float) -> float:
    """``name`` as a finite number of seconds > 0 (``default`` when unset or empty): nan, inf, 0 and negatives are
    refused, as is text that is not a number."""
    text = _text(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise EnvironmentVariableError(f"{name} must be a finite number of seconds > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise EnvironmentVariableError(f"{name} must be a finite number of seconds > 0, got {text!r}")
    return value


def flag(name: str) -> bool:
    """``name`` as a switch: unset, empty or "0" off, "1" on; anything else refused (a "yes" that silently meant off
    would be worse)."""
    text = _text(name)
    if text is None or text == "0":
        return False
    if text == "1":
        return True
    raise EnvironmentVariableError(f"{name} must be 0 or 1, got {text!r}")


def directory(name: str) -> str | None:
    """``name`` as a path that is not an existing file (None when unset or empty)."""
    text = _text(name)
    if text is not None and os.path.isfile(text):
        raise EnvironmentVariableError(f"{name}={text!r} is a file: it must name a directory (made if absent)")
    return text


ORPHAN_GRACE_DEFAULT_S = 120.0

VARIABLES: dict[str, tuple[Callable[[str], Any], str]] = {
    "PARAVT_THREADS": (positive_int, "torch CPU threads where no --threads is given"),
    "PARAVT_ORPHAN_GRACE_S": (lambda n: positive_seconds(n, ORPHAN_GRACE_DEFAULT_S),
                              "seconds a paravt repro worker whose parent died has to stop before it is ended"),
    "PARAVT_NATIVE_NUMERICS": (flag, "1: leave torch's and MKL's choice of CPU vector code unpinned"),
    "PARAVT_CACHE": (directory, "where synthetic videos, tiny models and benchmark media are kept"),
}
"""The variables, their readers and what each is for."""


def check_environment() -> None:
    """Read every variable of ``VARIABLES``; the first bad one is an ``EnvironmentVariableError`` naming it."""
    for name, (read, _) in VARIABLES.items():
        read(name)


__all__ = ["VARIABLES", "EnvironmentVariableError", "check_environment", "directory", "flag", "positive_int",
           "positive_seconds"]  # fmt: skip
