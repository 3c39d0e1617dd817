"""A run's checkpoint on disk: written aside, flushed, verified, then swapped in, so that neither a kill at any
instant nor a full disk costs the last good one.

    RUN/checkpoint/         the newest complete checkpoint (state.json, trainer.pt, model/, reference.pt)
    RUN/checkpoint.tmp/     the one being written; promoted only once it verifies

``save`` writes every file of the new checkpoint into ``checkpoint.tmp``, fsyncs them, writes ``state.json``
last (fsynced too), verifies the whole directory and only then removes ``checkpoint`` and renames. A kill
between the removal and the rename leaves a verified tmp, which ``recover`` promotes on ``--resume``; a tmp
that does not verify (killed mid-write, an ENOSPC that left ``state.json`` empty) is never promoted.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paravt.learners.policies.card import CARD_NAME
from paravt_env import storage

logger = logging.getLogger(__name__)

REQUIRED_FILES = ("state.json", "trainer.pt", "model/config.json", f"model/{CARD_NAME}")
"""Files every complete checkpoint holds, non-empty (besides its weights, ``model/model*.safetensors``)."""


def problem(path: Path) -> str | None:
    """What makes ``path`` not a complete checkpoint (a file missing or empty, ``state.json`` unreadable, no
    weights), or None."""
    for name in REQUIRED_FILES:
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size == 0:
            return f"{name} is empty"
    try:
        state = json.loads((path / "state.json").read_text())
        int(state["step"]), list(state["order"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"state.json is unreadable ({exc.__class__.__name__}: {exc})"
    if not any(f.stat().st_size > 0 for f in (path / "model").glob("model*.safetensors")):
        return "model/ holds no weights"
    return None


def saved_step(ckpt: Path) -> int | None:
    """The step ``ckpt`` was saved at, None where it has no readable state."""
    try:
        return int(json.loads((ckpt / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recover(out: Path) -> None:
    """Before resuming ``out``: promote a verified ``checkpoint.tmp`` (a kill between the removal of the old
    checkpoint and the rename), discard an unverified one, and refuse a damaged ``checkpoint``."""
    ckpt, tmp = out / "checkpoint", out / "checkpoint.tmp"
    if tmp.exists():
        why = problem(tmp)
        if why is None:
            logger.warning("%s: completing an interrupted checkpoint swap", out)
            shutil.rmtree(ckpt, ignore_errors=True)
            os.replace(tmp, ckpt)
            storage.fsync_dir(out)
        else:
            logger.warning("%s: discarding an incomplete checkpoint.tmp (%s); %s", out, why,
                           "the previous checkpoint is kept" if ckpt.exists() else "there is no earlier checkpoint")  # fmt: skip
            shutil.rmtree(tmp, ignore_errors=True)
    if ckpt.exists() and (why := problem(ckpt)) is not None:
        raise ValueError(f"{ckpt} is damaged ({why}): move it away to restart the run from its cold start, "
                         "or restore it from a copy")  # fmt: skip


def save(out: Path, state: dict[str, Any], write_files: Callable[[Path], None]) -> None:
    """``write_files(tmp)`` writes the model, optimiser and RNG files; ``state`` (``step``, ``order``, ...)
    becomes ``state.json``. On failure (a full disk) the partial copy is removed and ``checkpoint`` is left
    as it was; the ``OSError`` says which step could not be saved and which one is intact."""
    ckpt, tmp = out / "checkpoint", out / "checkpoint.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write_files(tmp)
        storage.fsync_tree(tmp)
        with open(tmp / "state.json", "w") as f:  # last: with it the checkpoint is complete
            f.write(json.dumps(state) + "\n")
            f.flush()
            os.fsync(f.fileno())
        storage.fsync_dir(tmp)
        if (why := problem(tmp)) is not None:
            raise OSError(errno.EIO, f"{tmp} did not verify after writing: {why}")
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        step = saved_step(ckpt)
        kept = (
            f"the checkpoint of step {step} in {ckpt} is intact"
            if step is not None
            else "no earlier checkpoint exists"
        )
        reason = "the disk is full" if storage.is_disk_full(exc) else str(exc)
        raise OSError(
            exc.errno, f"could not save the checkpoint of step {state.get('step')} ({reason}); {kept}"
        ) from exc
    shutil.rmtree(ckpt, ignore_errors=True)
    os.replace(tmp, ckpt)
    storage.fsync_dir(out)
