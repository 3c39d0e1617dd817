"""How frames appear inside the text the agent reads.

Every frame is written as its true timestamp followed by one image placeholder, e.g. ``<12.3 seconds><image>``.
A policy splits the text at the placeholders and puts the frames there, in order, through its own
processor; the number of placeholders in an observation's text always equals its number of frames.
"""

from __future__ import annotations

from collections.abc import Iterable

IMAGE_PLACEHOLDER = "<image>"

THINK_PREFIX = "<think>\n"
"""PARA-GRPO's forced opening of every main-agent turn (prompt, not policy output: the reward scores what
follows it)."""


def frame_marker(seconds: float) -> str:
    """The time tag in front of a frame (Qwen-VL style ``<t seconds>``, one decimal)."""
    return f"<{seconds:.1f} seconds>"


def frames_block(timestamps: Iterable[float]) -> str:
    """One line per frame: its time tag and its placeholder."""
    return "\n".join(f"{frame_marker(t)}{IMAGE_PLACEHOLDER}" for t in timestamps)


def count_placeholders(text: str) -> int:
    return text.count(IMAGE_PLACEHOLDER)


def escape_placeholders(text: object) -> str:
    """Text that quotes a model (errors, notes, sub-agent summaries) with its placeholders defused: such text
    must never forge a frame, so that an observation's placeholders always match its frames."""
    return str(text).replace(IMAGE_PLACEHOLDER, "[image]")
