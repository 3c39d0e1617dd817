"""Tool reward: no attempt 0, a parseable call 0.1, a call that got a response 0.3, +0.5 when the answer is
also right (capped at 1). Released definition: ``paravt/rl/rewards/tool.py``.

Known quirk of the release, kept in the parity source ``"completion"``: "got a response" is read as
``<tool_response>`` appearing in the scored completion, i.e. in text the *policy* generated (tool responses
are loss-masked prompt tokens, so in practice the 0.3 level is reached only when the model writes the tag
itself). The ``"executed"`` source asks the env instead: 0.3 when at least one crop really ran.
"""

from __future__ import annotations

from .format import has_parseable_tool_call

TOOL_SOURCES = ("completion", "executed")


def tool_reward(
    completion: str, accuracy: float, *, source: str = "completion", executed_tool_calls: int | None = None
) -> float:
    """The tool term. ``source="executed"`` needs ``executed_tool_calls`` (crops the env ran this episode)."""
    if source == "completion":
        if not has_parseable_tool_call(completion):
            return 0.0
        reward = 0.3 if "<tool_response>" in completion else 0.1
    elif source == "executed":
        if executed_tool_calls is None:
            raise ValueError(
                'tool_source="executed" needs executed_tool_calls (the number of crops the env ran)'
            )
        if executed_tool_calls > 0:
            reward = 0.3
        elif has_parseable_tool_call(completion):
            reward = 0.1
        else:
            return 0.0
    else:
        raise ValueError(f"tool source must be one of {TOOL_SOURCES}, got {source!r}")
    if accuracy > 0:
        reward += 0.5
    return min(reward, 1.0)
