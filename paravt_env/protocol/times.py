"""Reading a time the model wrote: ``12.5``, ``"12.5"``, ``"12.5s"``, ``"12.5 seconds"``, ``"01:05"``,
``"1:02:03.5"``.

Models trained on subtitles and video players write clock times as often as seconds; a crop that asks for
``"01:05"`` means 65 s, not an error.
"""

from __future__ import annotations

import math
import re
from typing import Any

_SECONDS_RE = re.compile(
    r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:s|sec|secs|second|seconds)?\s*$", re.IGNORECASE
)
_CLOCK_RE = re.compile(r"^\s*(?:(\d{1,3}):)?(\d{1,3}):(\d{1,2}(?:\.\d*)?)\s*$")


def parse_time(value: Any) -> float | None:
    """Seconds as a float, or ``None`` when ``value`` is not a time.

    Numbers pass through (``inf``/``nan`` too: the crop validator decides what to do with them); strings may
    be seconds with an optional unit, or ``MM:SS`` / ``HH:MM:SS`` with optional fractional seconds. Booleans,
    lists and anything else are not times.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # a 400-digit integer literal
            return math.inf if value > 0 else -math.inf
    if not isinstance(value, str) or len(value) > 64:
        return None
    m = _SECONDS_RE.match(value)
    if m:
        return float(m.group(1))
    m = _CLOCK_RE.match(value)
    if m:
        hours, minutes, seconds = m.group(1), m.group(2), m.group(3)
        if float(seconds) >= 60 or (hours is not None and int(minutes) >= 60):
            return None
        return (int(hours) if hours else 0) * 3600 + int(minutes) * 60 + float(seconds)
    return None
