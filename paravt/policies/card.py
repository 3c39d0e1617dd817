"""A checkpoint's *policy card* (``paravt.json`` beside the weights): the protocol it was trained with.

A policy trained with a forced ``<think>\\n`` prefix, an 8-frame overview and 20-second crops at 0.5 fps
is evaluated on those settings unless the user asks otherwise: ``paravt eval --policy hf:DIR`` reads the card
for every option not given on the command line, and ``hf:`` policies force the prefix the card names.
Released checkpoints have no card; the paper's defaults apply to them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD_NAME = "paravt.json"
ENV_KEYS = ("frame_budget", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "min_pixels", "max_pixels",
            "prompt_mode", "tool_result", "dispatch", "crop_budget")  # fmt: skip


def write_card(model_dir: str | Path, *, think_prefix: bool, env: dict[str, Any], **extra: Any) -> Path:
    path = Path(model_dir) / CARD_NAME
    card = {"think_prefix": bool(think_prefix), "env": {k: env[k] for k in ENV_KEYS if k in env}, **extra}
    path.write_text(json.dumps(card, indent=2) + "\n")
    return path


def read_card(model_dir: str | Path) -> dict[str, Any]:
    """The card of a checkpoint directory, or ``{}`` when it has none (or ``model_dir`` is a hub id)."""
    path = Path(model_dir) / CARD_NAME
    if not path.is_file():
        return {}
    try:
        card = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to be a policy card") from None
    if not isinstance(card, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return card


DEFAULT_MAX_NEW_TOKENS = 2048
"""Tokens per turn for a policy without a card that names its own (the release's evaluation budget)."""


def turn_tokens(model_dir: str | Path) -> int:
    """Tokens per turn the checkpoint generated in training (``max_new_tokens`` on its card, the RL rollouts' cap),
    else ``DEFAULT_MAX_NEW_TOKENS``. A policy evaluated with a larger cap than it was trained under writes past the
    end of its turns (measured on the tiny main job: after its last call a greedy RL policy kept writing for 3,000-6,000
    characters, until the run-on text held an answer, and calls beside an answer never run), so an evaluation
    follows the card unless told."""
    value = read_card(model_dir).get("max_new_tokens")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_NEW_TOKENS


def trained_pixels(model_dir: str | Path) -> dict[str, int]:
    """``min_pixels`` / ``max_pixels`` the checkpoint's image processor ran at in training (``{}`` without a
    card): an ``HFPolicy`` of it must process frames at the same budget to see them as it was trained to."""
    card = read_card(model_dir)
    env = card.get("processor_pixels") or card.get("env", {})  # the processor's own budget where it had one
    return {k: int(env[k]) for k in ("min_pixels", "max_pixels") if env.get(k) is not None}
