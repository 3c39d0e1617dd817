"""nFrames Gating: a per-prompt overview budget K shared by every rollout of the prompt's GRPO group.

With 64 overview frames, skipping the tool is a shortcut and the call-vs-skip advantage collapses (the Tool
Necessity Gap). PARA-GRPO draws K ~ Uniform{4, 8, 16, 32, 64} per prompt so that some groups must crop to
answer. K comes from a stable hash (hashlib, not Python's per-process salted ``hash``) of (sample id, epoch,
seed): all rollouts of one prompt in one epoch see the same K, in every process, on every machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

FRAME_BUDGETS: tuple[int, ...] = (4, 8, 16, 32, 64)


def gated_frame_budget(
    sample_id: str, epoch: int = 0, seed: int = 0, choices: Sequence[int] = FRAME_BUDGETS
) -> int:
    """The overview budget K for one prompt in one epoch, uniform over ``choices``."""
    if not choices:
        raise ValueError("nFrames gating needs at least one frame budget to choose from")
    digest = hashlib.sha256(f"paravt-gating|{sample_id}|{int(epoch)}|{int(seed)}".encode()).digest()
    return int(choices[int.from_bytes(digest[:8], "big") % len(choices)])
