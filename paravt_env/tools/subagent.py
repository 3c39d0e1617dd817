"""The sub-agent protocol ("subagent" tool-result mode, as in the released ParaVT RL workflow).

Each executed crop goes to a sub-agent (in ParaVT the same weights as the main agent) that looks only at the
crop's frames and returns a short factual summary; the main agent receives the summaries, not the frames.
A sub-agent is any callable ``SubAgentRequest -> str``; an object that also has ``batch(requests)`` is
given all the crops of one turn at once (one batched generation instead of several).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..protocol.markers import frames_block
from ..video import Frames

SUBAGENT_SYSTEM_PROMPT = (
    "You are a video inspection sub-agent. You see frames cropped from a longer video, each tagged with "
    "its time in seconds. Describe, briefly and factually, what the frames show that could help answer the "
    "main question: objects, colours, shapes, actions, on-screen text, and the times they appear. Do not "
    "guess beyond what is visible. Reply in at most three sentences, without tags."
)

MAX_SUMMARY_CHARS = 2000
"""Summaries are cut here: a runaway sub-agent must not flood the main agent's context."""


@dataclass(frozen=True)
class SubAgentRequest:
    """One crop for a sub-agent to summarise."""

    question: str
    start: float
    end: float
    frames: Frames
    style: str = "paravt"
    """"paravt": our prompt (the main question, time-tagged frames, a system prompt). "release": the released
    workflow's crop_video sub-agent (no system prompt, the frames then a prompt naming only the window; its
    whole reply, cut at 512 tokens, is the summary)."""

    @property
    def release_style(self) -> bool:
        """Prompted as the released workflow prompts its sub-agent (see ``style``)."""
        return self.style == "release"

    @property
    def system_prompt(self) -> str | None:
        return None if self.release_style else SUBAGENT_SYSTEM_PROMPT

    def user_text(self) -> str:
        """The user turn with one ``<image>`` per frame, in the style's order."""
        if self.release_style:
            from ..protocol.markers import IMAGE_PLACEHOLDER
            from ..protocol.release import release_subagent_prompt

            return IMAGE_PLACEHOLDER * len(self.frames) + release_subagent_prompt(self.start, self.end)
        return self.prompt()

    def prompt(self) -> str:
        """The user turn: the main question, the window, and the frames with their time tags."""
        return (
            f"Main question: {self.question}\n"
            f"Frames from {self.start:.1f} s to {self.end:.1f} s of the video:\n"
            f"{frames_block(self.frames.timestamps)}\n"
            "Summarise what these frames show that is relevant to the main question."
        )


@runtime_checkable
class BatchSubAgent(Protocol):
    def batch(self, requests: Sequence[SubAgentRequest]) -> list[str]: ...


SubAgent = Callable[[SubAgentRequest], str]


def clean_summary(text: object) -> str:
    """Coerce a sub-agent's reply into the plain text the main agent will read."""
    summary = text if isinstance(text, str) else str(text)
    summary = summary.replace("<tool_response>", "").replace("</tool_response>", "").strip()
    if len(summary) > MAX_SUMMARY_CHARS:
        summary = summary[:MAX_SUMMARY_CHARS] + " [...]"
    return summary or "(the sub-agent returned nothing)"


class PendingSubAgent:
    """The sub-agent of a config written before its policy exists (a recipe with ``tool_result: subagent``: the
    trainer attaches the policy itself before any episode). Asked for a summary, it fails: the crop then
    reports the failure, as any failing sub-agent's does."""

    def __call__(self, request: SubAgentRequest) -> str:
        raise RuntimeError("no sub-agent attached: set EnvConfig.subagent (the trainer attaches its policy)")

    def __eq__(self, other: object) -> bool:  # every pending sub-agent is the same setting
        return isinstance(other, PendingSubAgent)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "PENDING_SUBAGENT"


PENDING_SUBAGENT = PendingSubAgent()
