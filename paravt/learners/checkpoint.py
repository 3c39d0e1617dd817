"""A run's checkpoint on disk: what it holds, how it is read back, and how it is written aside, flushed, verified, then swapped in, so that neither a kill at any
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
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paravt.policies.card import CARD_NAME, write_card
from paravt.policies.weights import weights_problem
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
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        return f"state.json is unreadable ({exc.__class__.__name__}: {exc})"
    if not any(f.stat().st_size > 0 for f in (path / "model").glob("model*.safetensors")):
        return "model/ holds no weights"
    if (why := weights_problem(path / "model")) is not None:
        return f"model/{why}"
    return None


def saved_step(ckpt: Path) -> int | None:
    """The step ``ckpt`` was saved at, None where it has no readable state."""
    try:
        return int(json.loads((ckpt / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
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


# --- what a checkpoint holds -------------------------------------------------------------------------------
def rng_states() -> dict[str, Any]:
    """torch's (CPU and, where there is one, every GPU's), numpy's and Python's global RNG states (what a checkpoint
    restores). Rollouts on a GPU sample from its generator: without it, a resumed run's rollouts were other draws
    than the uninterrupted run's (the resume tests on a GPU, docs/gpu.md)."""
    states = {"torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(), "python_rng": random.getstate()}
    if torch.cuda.is_available():
        states["cuda_rng"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch_rng"])
    np.random.set_state(states["numpy_rng"])
    random.setstate(states["python_rng"])
    cuda = states.get("cuda_rng")
    if cuda is None:
        return
    if torch.cuda.is_available() and torch.cuda.device_count() >= len(cuda):
        torch.cuda.set_rng_state_all(cuda)
    else:  # saved on a machine with more GPUs (or any): its GPU draws cannot be repeated here
        logger.warning("the checkpoint holds the RNG states of %d GPU(s) and this machine has %d: GPU sampling "
                       "continues from fresh states, not the saved ones", len(cuda),
                       torch.cuda.device_count() if torch.cuda.is_available() else 0)  # fmt: skip


def save_model(model: Any, target: Path, source: Path | None, cfg: Any) -> None:
    """``model`` as a loadable checkpoint: weights, the tokenizer / processor files of ``source``, and a policy card
    naming the protocol it was trained with under ``cfg`` (a ``TrainConfig``; ``paravt.policies.card``)."""
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    if source is not None:  # tokenizer, processor configs, chat template
        for f in Path(source).iterdir():
            if f.is_file() and not f.name.startswith(("model", "config.json", "generation_config")):
                shutil.copy2(f, target / f.name)
    low, high = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    write_card(target, think_prefix=cfg.think_prefix, env=asdict(cfg.env), algorithm=cfg.algorithm,
               processor_pixels={"min_pixels": low, "max_pixels": high},
               max_new_tokens=cfg.rollout.max_new_tokens)  # fmt: skip


def training_files(model: Any, optimizer: Any, reference: Any, rng: dict[str, Any], source: Path | None,
                   cfg: Any) -> Callable[[Path], None]:  # fmt: skip
    """The ``write_files`` of ``save`` for a training run: ``model/`` (``save_model``), ``trainer.pt`` (the optimiser
    and the RNG states ``rng``) and, with a KL reference, ``reference.pt``."""

    def write(tmp: Path) -> None:
        save_model(model, tmp / "model", source, cfg)
        torch.save({"optimizer": optimizer.state_dict(), **rng}, tmp / "trainer.pt")
        if reference is not None:
            torch.save(reference.state_dict(), tmp / "reference.pt")

    return write


def load(ckpt: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """``state.json``, ``trainer.pt`` (optimiser and RNG states) and the reference's state dict (None without one)
    of the checkpoint ``ckpt`` (verified by ``recover`` first)."""
    state = json.loads((ckpt / "state.json").read_text())
    extra = torch.load(ckpt / "trainer.pt", weights_only=False)
    reference = torch.load(ckpt / "reference.pt") if (ckpt / "reference.pt").is_file() else None
    return state, extra, reference
