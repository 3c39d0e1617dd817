"""Policy specs of the command line (``detector``, ``hf:PATH``, ``openai:URL``, ``sglang:URL``) -> agents.

An agent is anything with ``reset(obs, info, sample)`` and ``act(obs) -> str`` (``paravt.baselines.ScriptedAgent``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paravt.baselines import BASELINES, make_baseline

MODEL_PREFIXES = ("hf:", "openai:", "sglang:")


def make_agent_factory(
    spec: str, *, max_new_tokens: int = 2048, tool_result: str = "frames", protocol: str = "paravt",
    temperature: float = 0.0,
) -> tuple[Callable[[], Any], Any]:
    """A zero-argument agent factory for ``spec``, and the sub-agent the env should call (or ``None``).
    ``temperature``: a model policy's sampling temperature (0: greedy, the paper's eval protocol)."""
    if not (0.0 <= temperature < float("inf")):
        raise ValueError(f"--temperature must be a number >= 0, got {temperature}")
    if spec in BASELINES:
        if tool_result == "subagent":
            raise ValueError("scripted baselines read frames themselves: use --tool-result frames with them")
        if temperature > 0:
            raise ValueError(f"--temperature applies to model policies; the scripted baseline {spec!r} does not sample")
        return (lambda: make_baseline(spec)), None
    if spec.startswith(MODEL_PREFIXES):
        from paravt.policies import (
            agent_for_spec,  # torch/transformers/http stacks, imported only here
        )

        return agent_for_spec(spec, max_new_tokens=max_new_tokens, tool_result=tool_result, protocol=protocol,
                              temperature=temperature)  # fmt: skip
    raise ValueError(
        f"unknown policy {spec!r}; use one of {sorted(BASELINES)} or hf:PATH, openai:URL, sglang:URL"
    )


def preflight(spec: str) -> None:
    """Fail at once, with one clear line, when a server policy's server cannot be reached."""
    if spec.startswith(("openai:", "sglang:")):
        from paravt.policies.remote import check_reachable

        url = spec.split(":", 1)[1].partition("#")[0]
        check_reachable(url)
