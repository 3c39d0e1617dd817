"""Wall-clock measurements reported in ``info`` without making transitions look non-deterministic.

Two runs of the same episode decode the same frames in different times. Timings describe the machine, not
the environment's state, so ``StepTiming`` objects compare equal to each other whatever their values: this
keeps ``gymnasium.utils.env_checker.check_env``'s determinism checks meaningful for everything else in
``info``. Read the values as attributes or by key (``info["timing"]["decode_s"]``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, eq=False)
class StepTiming:
    """Seconds spent in one ``reset`` or ``step``."""

    decode_s: float = 0.0
    """Decoding frames (overview at reset; the sum over crops in a step, which overlap in parallel mode)."""
    subagent_s: float = 0.0
    """Wall time of the sub-agent phase (all summaries of the turn)."""
    tool_wall_s: float = 0.0
    """Wall time of the whole tool phase: validation, decoding and sub-agents."""
    total_s: float = 0.0
    """Wall time of the whole call."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepTiming)

    __hash__ = object.__hash__

    def __getitem__(self, key: str) -> float:
        return self.as_dict()[key]

    def as_dict(self) -> dict[str, float]:
        return asdict(self)
