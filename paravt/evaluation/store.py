"""The results store of ``paravt eval``: one JSON line per finished sample, appended durably, read back
tolerating a line an interruption cut; the run's configuration (a resumed run must match it); one writer per
directory (an OS lock)."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paravt_env import storage

RESULTS = "results.jsonl"
CONFIG = "eval_config.json"


@dataclass
class SampleResult:
    """One line of ``results.jsonl``."""

    id: str
    question_type: str
    duration: float | None
    prediction: str = ""
    answer: str = ""
    score: float = 0.0
    correct: bool = False
    reward: float = 0.0
    tool_calls: int = 0
    turns: int = 0
    frame_budget: int = 0
    wall_s: float = 0.0
    """The episode's own seconds, from the first call to its answer (in a batched evaluation it includes waiting
    for the other episodes' turns)."""
    started_at: float | None = None
    ended_at: float | None = None
    """When the episode started and ended (Unix seconds): the run's elapsed time is the union of these intervals
    (``paravt.evaluation.report.elapsed_s``), never their sum. Rows written before they were recorded have none."""
    error: str | None = None
    transient: bool = False
    """The error may not recur (server unreachable, timeout, 5xx): a resumed run retries the sample."""
    extra: dict[str, Any] = field(default_factory=dict)
    episode: dict[str, Any] | None = None
    """What the agent did (``paravt_env.records``, schema ``paravt-episode/1``); rows written before records
    existed have none and still resume."""
    inputs: dict[str, Any] | None = None
    """What the policy was shown, as hashes (``fingerprints.input_identity``): the sample's row and its video's
    content identity. Rows written before inputs were recorded have none."""


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every complete line of a results file; a line cut short by an interruption is dropped (its sample
    will be run again)."""
    path = Path(path)
    if not path.exists():
        return []
    rows, seen = [], set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "id" in row and row["id"] not in seen:
            seen.add(row["id"])
            rows.append(row)
    return rows


class ResultsWriter:
    """Appends result lines durably and from several threads."""

    def __init__(self, path: Path, existing: list[dict[str, Any]]) -> None:
        self.path = path
        # Rewrite the file with its complete lines only, so a half-written last line cannot glue itself to
        # the next result.
        storage.write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in existing))
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


LATE_RECORDED = ("max_new_tokens",)
"""Settings recorded only since a later version: an evaluation written before lacks them and resumes (what it
ran with was not written down; the first rows were made under the caller's defaults of then)."""


def check_config(out: Path, config: dict[str, Any]) -> None:
    path = out / CONFIG
    if path.exists():
        from paravt_env.storage import read_json

        old = read_json(path)  # damaged: a DamagedFile naming it, and the file left as it is
        diff = {k: (old.get(k), v) for k, v in config.items()
                if k != "limit" and old.get(k) != v and not (k in LATE_RECORDED and k not in old)}  # fmt: skip
        if diff:
            details = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(diff.items()))
            raise ValueError(f"{out} holds results of a different evaluation ({details}); use another --out")
    path.write_text(json.dumps(config, indent=2) + "\n")


def is_transient(exc: BaseException) -> bool:
    """A failure the same request may not meet again: the server unreachable, a timeout, a 5xx answer."""
    return bool(getattr(exc, "transient", False)) or isinstance(exc, (TimeoutError, ConnectionError))


def exclusive_lock(out: Path):
    """Hold ``out/eval.lock`` while the evaluation runs: two processes appending to one ``results.jsonl``
    would lose rows (``paravt_env.storage.DirectoryLock``)."""
    return storage.exclusive_lock(out, "eval.lock")
