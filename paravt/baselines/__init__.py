"""Scripted baselines that read the synthetic videos' pixels (detector, no-tool, uniform crops, oracle)."""

from paravt.baselines.agents import (
    BASELINES,
    DetectorAgent,
    NoToolAgent,
    OracleAgent,
    ScriptedAgent,
    UniformAgent,
    make_baseline,
)

__all__ = [
    "BASELINES",
    "DetectorAgent",
    "NoToolAgent",
    "OracleAgent",
    "ScriptedAgent",
    "UniformAgent",
    "make_baseline",
]
