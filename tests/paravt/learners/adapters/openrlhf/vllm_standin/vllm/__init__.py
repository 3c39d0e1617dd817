"""The names OpenRLHF's rollout code takes from vLLM, answered on the CPU by a transformers model (see README.md).

Environment (set for the Ray actors through ``runtime_env``): ``PARAVT_VLLM_SCRIPT``, a JSON list of main-agent turns
(``ScriptedEngine``; unset: the model writes every turn); ``PARAVT_VLLM_LOG``, a JSON-lines file that receives one
line per request served (the actor's working directory, the prompt as served, pads expanded, and the pads per
image), for the tests to compare with what the trainer trains on.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any

__version__ = "0.11.0"  # what OpenRLHF 0.11.2's version checks accept (> 0.9.0, > 0.10.0)


@dataclass
class SamplingParams:
    """``vllm.SamplingParams``: the fields OpenRLHF's ``SamplesGenerator`` passes."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    min_tokens: int = 0
    skip_special_tokens: bool = True
    logprobs: int | None = None


class AsyncEngineArgs:
    """``vllm.AsyncEngineArgs``: keeps what ``RolloutRayActor`` passes (``model``, ``max_model_len``,
    ``limit_mm_per_prompt``, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            raise TypeError("AsyncEngineArgs takes keyword arguments only")
        self.__dict__.update(kwargs)


@dataclass
class _OutputProcessor:
    unfinished: int = 0

    def get_num_unfinished_requests(self) -> int:
        return self.unfinished


@dataclass
class AsyncLLMEngine:
    """``vllm.AsyncLLMEngine``: ``generate`` streams one final output per request, as the actor reads it."""

    args: AsyncEngineArgs
    engine: Any
    output_processor: _OutputProcessor = field(default_factory=_OutputProcessor)

    @classmethod
    def from_engine_args(cls, args: AsyncEngineArgs) -> AsyncLLMEngine:
        from paravt.learners.adapters.openrlhf.local_engine import LocalEngine, ScriptedEngine
        from paravt.policies.hf import HFPolicy

        # vLLM loads the checkpoint's processor as it is: its own pixel budget, no override
        policy = HFPolicy.from_pretrained(args.model, temperature=1.0)
        script = os.environ.get("PARAVT_VLLM_SCRIPT")
        return cls(args, ScriptedEngine(policy, json.loads(script)) if script else LocalEngine(policy))

    async def is_sleeping(self) -> bool:
        return False

    async def generate(self, prompt: dict, sampling_params: SamplingParams, request_id: str):
        images = list((prompt.get("multi_modal_data") or {}).get("image") or [])
        limit = (getattr(self.args, "limit_mm_per_prompt", None) or {}).get("image")
        if limit is not None and len(images) > limit:  # vLLM refuses a request above the engine's image limit
            raise ValueError(f"request {request_id}: {len(images)} images, above limit_mm_per_prompt {limit}")
        self.output_processor.unfinished += 1
        try:
            out = await asyncio.to_thread(self.engine.serve, list(prompt["prompt_token_ids"]), sampling_params,
                                          {"image": images} if images else None)  # fmt: skip
        finally:
            self.output_processor.unfinished -= 1
        served = out.prompt_token_ids  # this request's (served[-1] may be another's: requests run concurrently)
        max_len = getattr(self.args, "max_model_len", None)
        if max_len is not None and len(served) > max_len:  # vLLM refuses a prompt longer than the model length
            raise ValueError(f"request {request_id}: prompt of {len(served)} tokens, above max_model_len {max_len}")
        log = os.environ.get("PARAVT_VLLM_LOG")
        if log:
            pad = self.engine.policy.image_pad_id
            from paravt.learners.adapters.openrlhf.local_engine import token_runs

            runs = token_runs(served, pad)
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"cwd": os.getcwd(), "prompt": served, "pads_per_image": runs}) + "\n")
        yield out
