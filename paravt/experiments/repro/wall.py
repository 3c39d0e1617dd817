"""``OUT/wall_s.json``: the wall time of each stage of ``paravt repro``, added up over the invocations that resumed
the run.

A stage's time is written when it ends (an interrupt or a SIGTERM included) and whenever ``flush`` is called while
it runs: ``paravt repro`` flushes after every finished arm run, so a kill that no handler sees (SIGKILL, a machine
taken back at the end of a session) loses at most the time of the runs still in flight, not the whole stage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paravt_env.storage import DamagedFile, read_json, write_text_atomic


class WallClock:
    """Seconds per stage, read from and written to ``path`` (a JSON object: stage name -> seconds)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.seconds: dict[str, float] = read_json(self.path) if self.path.is_file() else {}
        bad = [k for k, v in self.seconds.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
        if bad:
            raise DamagedFile(f"{self.path}: damaged, stage {bad[0]!r} holds {self.seconds[bad[0]]!r}, not seconds")
        self._stage: str | None = None
        self._since = 0.0

    def timed(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, its time added to ``stage`` (also when it raises: the run resumes from where it stopped)."""
        self._stage, self._since = stage, time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.flush()
            self._stage = None

    def flush(self) -> None:
        """Add the running stage's time so far and write the file (nothing runs: nothing to add)."""
        if self._stage is None:
            return
        now = time.perf_counter()
        self.seconds[self._stage] = self.seconds.get(self._stage, 0.0) + now - self._since
        self._since = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps(self.seconds, indent=2) + "\n")
