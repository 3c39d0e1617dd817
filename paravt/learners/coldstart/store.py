"""What an interrupted cold start leaves on disk, so that ``--resume`` continues it instead of starting over.

    RUN/coldstart/partial/
        perception_examples.pt     the perception stage's examples, once built (rebuilding them decodes every video)
        perception.pt              the perception loop at its last completed step (weights, optimiser, RNGs, rows)
        teacher_NNNNNN.pt          teacher episodes, a shard at a time (episodes, drops, the teacher's RNG after them)
        sft.pt                     the SFT loop at its last completed step

Every file is written aside, fsynced and renamed into place, so a kill at any instant leaves either the old
file or the new one. The directory goes once ``RUN/coldstart/model`` is saved. Loop states are saved at step
boundaries only (``paravt.learners.interrupts``): the weights in a file are those of the step it names.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from paravt_env import storage

logger = logging.getLogger(__name__)


class ColdStartStore:
    """The partial state of one run's cold start, under ``RUN/coldstart/partial``."""

    def __init__(self, run: str | Path) -> None:
        self.root = Path(run) / "coldstart" / "partial"

    def exists(self) -> bool:
        return self.root.is_dir() and any(self.root.glob("*.pt"))

    def describe(self) -> str:
        """What is saved, in words (the resume message)."""
        parts = []
        if (self.root / "perception_examples.pt").is_file():
            parts.append("perception examples")
        for stage in ("perception", "sft"):
            state = self.load(stage)
            if state is not None:
                parts.append(f"{stage} at step {state['step']}/{state['steps']}")
        shards = self.teacher_shards()
        if shards:
            parts.append(f"{shards[-1]['end']} teacher episodes")
        return ", ".join(parts) or "nothing"

    def save(self, name: str, obj: Any) -> None:
        """``obj`` as ``partial/NAME.pt``: written aside, fsynced, renamed (a kill leaves the previous one)."""
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / f"{name}.pt"
        tmp = target.with_suffix(".pt.tmp")
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        storage.fsync_dir(self.root)

    def load(self, name: str) -> Any | None:
        path = self.root / f"{name}.pt"
        if not path.is_file():
            return None
        try:
            return torch.load(path, weights_only=False)
        except Exception as exc:  # renamed only when complete: unreadable means damaged, say so and redo
            logger.warning("%s is unreadable (%s): that part of the cold start is redone", path, exc)
            return None

    def teacher_shards(self) -> list[dict[str, Any]]:
        """The saved teacher shards, in order, as long as they are contiguous from episode 0."""
        shards, end = [], 0
        for path in sorted(self.root.glob("teacher_*.pt")):
            shard = self.load(path.stem)
            if shard is None or shard["start"] != end:
                break
            shards.append(shard)
            end = shard["end"]
        return shards

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
