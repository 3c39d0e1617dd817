"""The message protocols, one ``Episode`` class each, registered by name (``EnvConfig.protocol``):

- ``"paravt"``: ours (``ParaVTEpisode``);
- ``"release"``: the released eval driver's (``ReleaseEvalEpisode``);
- ``"release_rl"``: the released RL workflow's, crops summarised by sub-agents (``ReleaseRLEpisode``);
- ``"longvt"``: LongVT's evaluation dialogue, one ``crop_video`` call a turn (``LongVTEpisode``).

This registry is the one place that tells protocols apart by name: everything else asks the episode class.
"""

from __future__ import annotations

from typing import Any

from .base import Episode, Opening, Turn, message
from .longvt import LongVTEpisode
from .paravt import ParaVTEpisode
from .release_eval import ReleaseEvalEpisode
from .release_rl import ReleaseRLEpisode, rl_opening_messages

EPISODES: dict[str, type[Episode]] = {cls.name: cls for cls in (ParaVTEpisode, ReleaseEvalEpisode, ReleaseRLEpisode, LongVTEpisode)}
PROTOCOLS = tuple(EPISODES)


def resolve_protocol(protocol: str, tool_result: str) -> str:
    """The registered name of a protocol. ``"release"`` with ``tool_result="subagent"`` is the release's RL
    workflow (its eval driver has no sub-agents), the spelling recipes used before ``"release_rl"`` had a name."""
    if protocol not in EPISODES:
        raise ValueError(f"EnvConfig.protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "release" and tool_result == "subagent":
        return "release_rl"
    return protocol


def episode_class(protocol: str) -> type[Episode]:
    """The episode class of a registered protocol name."""
    try:
        return EPISODES[protocol]
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; known: {PROTOCOLS}") from None


def episode_of(config: Any) -> type[Episode]:
    """The episode class an ``EnvConfig`` (or anything with ``protocol`` and ``tool_result``) plays."""
    return episode_class(resolve_protocol(config.protocol, config.tool_result))


__all__ = ["EPISODES", "PROTOCOLS", "Episode", "LongVTEpisode", "Opening", "ParaVTEpisode", "ReleaseEvalEpisode", "ReleaseRLEpisode",
           "Turn", "episode_class", "episode_of", "message", "resolve_protocol", "rl_opening_messages"]
