"""From an observation to chat messages, in one place.

Every episode lists its messages in ``info["messages"]`` at reset and after every step (``paravt_env.episodes``):
role, text with one ``<image>`` placeholder per frame, how many of the observation's frames it takes, and how
its content is sent. ``observation_messages`` pairs them with the observation's frames; every consumer (the
policy agent, the rollouts, the SFT and probe episodes, the TRL / verl / OpenRLHF adapters) renders those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .protocol.markers import IMAGE_PLACEHOLDER


@dataclass
class Message:
    """One chat message; ``text`` holds one ``<image>`` placeholder per entry of ``images``."""

    role: str
    text: str
    images: list[np.ndarray] = field(default_factory=list)
    as_parts: bool = False
    """Send the content as a list of parts even without images (the release's first user turn is a list)."""
    video_url: str | None = None
    """A video the server samples itself (``file://`` URL, before the text): only OpenAI-compatible servers
    that read local videos (vLLM with ``--allowed-local-media-path``) can take it."""

    def __post_init__(self) -> None:
        n = self.text.count(IMAGE_PLACEHOLDER)
        if n != len(self.images):
            raise ValueError(f"{self.role} message has {n} {IMAGE_PLACEHOLDER} placeholders but {len(self.images)} images")

    def parts(self) -> list[dict]:
        """Chat-template content parts: text and image parts in reading order."""
        out: list[dict] = []
        chunks = self.text.split(IMAGE_PLACEHOLDER)
        for i, chunk in enumerate(chunks):
            if chunk:
                out.append({"type": "text", "text": chunk})
            if i < len(chunks) - 1:
                out.append({"type": "image"})
        return out


def observation_messages(obs: dict[str, Any], info: dict[str, Any]) -> list[Message]:
    """The messages of an observation (``info["messages"]``), each with its share of the observation's frames,
    in order. Raises ``ValueError`` when the listing and the frames disagree."""
    listing: Sequence[dict[str, Any]] | None = info.get("messages")
    if listing is None:
        raise ValueError("info has no 'messages': an env of this version lists them at reset and after every step")
    frames = list(obs["frames"])
    out, used = [], 0
    for m in listing:
        n = int(m.get("frames", 0))
        out.append(Message(m["role"], m["text"], frames[used : used + n], as_parts=bool(m.get("parts")),
                           video_url=m.get("video_url")))  # fmt: skip
        used += n
    if used != len(frames):
        raise ValueError(f"info['messages'] takes {used} frames but the observation holds {len(frames)}")
    return out


__all__ = ["Message", "observation_messages"]
