"""A CPU stand-in for verl's LLM server client: ``server_manager.generate`` served by a transformers model.

verl's rollout replicas (vLLM / SGLang) need GPUs. ``LocalServerManager`` answers the call the agent loops
make — ``await generate(request_id=..., prompt_ids=..., sampling_params=..., image_data=[PIL, ...])`` ->
``verl.workers.rollout.replica.TokenOutput`` (generated ids, their log-probs, stop reason) — with
``HFPolicy`` on the prompt ids (image pads already expanded by verl's Continuous Token builder), so an agent
loop can be run and tested end to end on a laptop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from paravt.policies.hf import HFPolicy


class LocalServerManager:
    """verl's ``LLMServerClient.generate`` on a local ``HFPolicy`` (calls serialised by the policy's lock)."""

    def __init__(self, policy: HFPolicy, max_new_tokens: int = 256) -> None:
        self.policy = policy
        self.max_new_tokens = max_new_tokens

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, **_: Any):  # fmt: skip
        return await asyncio.to_thread(self._generate, list(prompt_ids), dict(sampling_params or {}), image_data or [])

    def _generate(self, ids: list[int], params: dict[str, Any], images: list[Any]):
        from verl.workers.rollout.replica import TokenOutput

        encoded = self.policy.encode_ids(ids, images)
        [gen] = self.policy.generate_encoded([encoded], temperature=params.get("temperature", 1.0),
                                             max_new_tokens=params.get("max_tokens") or self.max_new_tokens)  # fmt: skip
        stop = "completed" if gen.finish_reason == "stop" else None
        return TokenOutput(token_ids=list(gen.token_ids), log_probs=list(gen.logprobs), stop_reason=stop)
