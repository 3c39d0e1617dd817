"""Scripted baselines that read the synthetic videos' pixels (detector, no-tool, uniform crops, oracle)."""

from .agents import (
    BASELINES,
    DetectorAgent,
    NoToolAgent,
    OracleAgent,
    ScriptedAgent,
    UniformAgent,
    make_baseline,
)
from .runner import EpisodeResult, play_episode

__all__ = [
    "BASELINES",
    "DetectorAgent",
    "EpisodeResult",
    "NoToolAgent",
    "OracleAgent",
    "ScriptedAgent",
    "UniformAgent",
    "make_baseline",
    "play_episode",
]
