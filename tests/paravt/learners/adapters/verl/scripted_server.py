"""The one stand-in of the verl tests: an inference server behind verl's ``generate`` contract (a vLLM server
replica's ``generate(request_id, prompt_ids, sampling_params, image_data, ...) -> TokenOutput``).

It writes ``engine_env.SCRIPT``'s next turn (a random tiny model writes no valid call) and scores it with the tiny
Qwen3-VL: one forward pass over the prompt's tokens and images gives the log-probs it reports. The turn is read from
the prompt itself (how many assistant turns it opens), since verl's ``LLMServerClient`` gives every turn a fresh
request id. Used in process (``test_worker``: the worker's ``llm_client``) and as a Ray actor behind verl's own
load balancer and client (``test_ray_workers``); it imports nothing of the test modules, so Ray can ship it by value.
"""

from __future__ import annotations

import threading
from typing import Any

SCRIPT = [  # engine_env.SCRIPT: what the policy writes after the forced "<think>\n"
    'Two windows at once.</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 3, "end_time": 13}}</tool_call>'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": 25, "end_time": 35}}</tool_call>',
    "I saw enough.</think><answer>red</answer>",
]


class ScriptedServer:
    def __init__(self, model_path: str, temperature: float = 1.0) -> None:
        import torch

        from paravt.policies.hf import HFPolicy

        torch.manual_seed(0)
        self.policy = HFPolicy.from_pretrained(model_path, temperature=temperature)
        self.turns: list[int] = []  # the scripted turn each request got
        self._lock = threading.Lock()  # requests are answered in threads

    def _turn(self, prompt_ids: list[int]) -> int:
        text = self.policy.tokenizer.decode(prompt_ids)
        return max(0, text.count("<|im_start|>assistant") - 1)

    def generate_sync(self, prompt_ids: list[int], sampling_params: dict[str, Any], image_data: list[Any],
                      mm_processor_kwargs: dict[str, Any] | None = None) -> Any:  # fmt: skip
        import torch
        from verl.workers.rollout.replica import TokenOutput

        ids = list(prompt_ids)
        turn = self._turn(ids)
        with self._lock:
            self.turns.append(turn)
        tok = self.policy.tokenizer
        out = tok.encode(SCRIPT[min(turn, len(SCRIPT) - 1)], add_special_tokens=False) + [self.policy.end_of_turn_id]
        out = out[: sampling_params.get("max_tokens") or len(out)]
        # a server re-processes the images at the pixel budget it is sent (vLLM's mm_processor_kwargs): the features
        # must equal the pads already in the prompt, or the forward refuses them
        budget = {k: v for k, v in (mm_processor_kwargs or {}).items() if k in ("min_pixels", "max_pixels")}
        size = {"shortest_edge": budget["min_pixels"], "longest_edge": budget["max_pixels"]} if budget else None
        with self._lock:
            self.policy.pixel_kwargs = {"size": size} if size else {}
            encoded = self.policy.encode_ids(ids + out, list(image_data or []))
        with torch.no_grad():
            temperature = sampling_params.get("temperature") or 1.0
            lp = self.policy.sequence_logprobs(encoded, temperature=temperature)[len(ids) - 1 :]
        return TokenOutput(token_ids=out, log_probs=[float(x) for x in lp], stop_reason="completed")

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, mm_processor_kwargs: dict[str, Any] | None = None,
                       **_: Any) -> Any:  # fmt: skip
        import asyncio

        return await asyncio.to_thread(self.generate_sync, prompt_ids, sampling_params, image_data or [], mm_processor_kwargs)

    def turn_counts(self) -> dict[int, int]:
        """How many requests got each scripted turn (the Ray test checks every trajectory's turns reached it)."""
        return {t: self.turns.count(t) for t in sorted(set(self.turns))}
