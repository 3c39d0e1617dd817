"""A CPU stand-in for OpenRLHF's vLLM engine: the ``llm_engine.generate`` contract served by a transformers
model (``HFPolicy``), and a processor adapter for machines where ``AutoProcessor`` cannot load.

Contract (OpenRLHF 0.11.x agent executors): ``await llm_engine.generate(prompt_token_ids, sampling_params,
multi_modal_data={"image": [PIL images]})`` returns an object whose ``outputs[0]`` has ``token_ids``,
``text``, ``finish_reason`` ("stop" | "length") and, when ``sampling_params.logprobs`` is set, ``logprobs``:
one ``{token_id: Logprob(logprob=...)}`` per generated token. The prompt ids carry every image's expanded
pads, in the order of the images.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import torch

from paravt.policies.hf import HFPolicy
from paravt.policies.vision_inputs import expand_image_tokens, process_images
from paravt_env.tools import SUBAGENT_SYSTEM_PROMPT


@dataclass
class SamplingParams:
    """The fields of ``vllm.SamplingParams`` the executors read and write."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = 256
    logprobs: int | None = 1


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[dict[int, Logprob]] | None = None


@dataclass
class RequestOutput:
    outputs: list[CompletionOutput] = field(default_factory=list)


class LocalEngine:
    """``llm_engine.generate`` on a local ``HFPolicy`` (calls are serialised; the policy holds a lock)."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data: dict | None = None) -> RequestOutput:
        return await asyncio.to_thread(self._generate, list(prompt_token_ids), sampling_params, multi_modal_data)

    def _generate(self, ids: list[int], params: Any, mm: dict | None) -> RequestOutput:
        policy = self.policy
        encoded = policy.encode_ids(ids, (mm or {}).get("image", []))
        [gen] = policy.generate_encoded([encoded], temperature=params.temperature, max_new_tokens=params.max_tokens)
        text = policy.tokenizer.decode([t for t in gen.token_ids if t not in policy.eos_ids])
        logprobs = None
        if getattr(params, "logprobs", None) is not None:
            logprobs = [{t: Logprob(lp)} for t, lp in zip(gen.token_ids, gen.logprobs, strict=True)]
        return RequestOutput([CompletionOutput(list(gen.token_ids), text, gen.finish_reason, logprobs)])


class ScriptedEngine(LocalEngine):
    """The main agent's turns from a script (``turns``, the last one repeated), each scored by a real forward
    pass of the policy at the request's temperature, so its log-probs are the model's; sub-agent requests (their
    prompts carry the sub-agent's or the release's sub-agent instructions) get the model's own generation.
    For checking the executor's token / action-range / log-prob bookkeeping on an episode with parallel calls,
    whatever the model would have written (a random-weight model at real size writes no valid call)."""

    SUBAGENT_MARKERS = (SUBAGENT_SYSTEM_PROMPT[:40], "You are analyzing a video segment")

    def __init__(self, policy: HFPolicy, turns: list[str]) -> None:
        super().__init__(policy)
        self.turns, self.turn = list(turns), 0

    def _generate(self, ids: list[int], params: Any, mm: dict | None) -> RequestOutput:
        head = self.policy.tokenizer.decode(ids)
        if any(marker in head for marker in self.SUBAGENT_MARKERS):
            return super()._generate(ids, params, mm)
        text = self.turns[min(self.turn, len(self.turns) - 1)]
        self.turn += 1
        out_ids = self.policy.tokenizer.encode(text, add_special_tokens=False) + [self.policy.end_of_turn_id]
        encoded = self.policy.encode_ids(ids + out_ids, (mm or {}).get("image", []))
        with torch.no_grad():
            lp = self.policy.sequence_logprobs(encoded, temperature=params.temperature)[len(ids) - 1 :]
        logprobs = [{t: Logprob(float(x))} for t, x in zip(out_ids, lp, strict=True)]
        return RequestOutput([CompletionOutput(out_ids, text, "stop", logprobs)])


class ProcessorAdapter:
    """What OpenRLHF calls ``hf_tokenizer`` for a VLM — ``processor(text=..., images=...)``, an
    ``image_processor``, ``apply_chat_template``, ``decode`` — from a tokenizer and an image processor
    (the Qwen-VL processors' one text step: each image pad expanded to its merged-patch count)."""

    def __init__(self, tokenizer: Any, image_processor: Any, pixel_kwargs: dict | None = None) -> None:
        self.tokenizer, self.image_processor = tokenizer, image_processor
        self.pixel_kwargs = pixel_kwargs or {}
        self.image_token_id = tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.merge_size = int(getattr(image_processor, "merge_size", 2))

    def __call__(self, text, images=None, add_special_tokens: bool = False, return_tensors: str = "pt", **_: Any) -> dict:
        texts = [text] if isinstance(text, str) else list(text)
        if len(texts) != 1:
            raise ValueError("ProcessorAdapter handles one text at a time")
        out: dict[str, Any] = {}
        body = texts[0]
        if images:
            out["pixel_values"], out["image_grid_thw"] = process_images(self.image_processor, images, self.pixel_kwargs)
            body = expand_image_tokens(body, out["image_grid_thw"], self.merge_size)
        ids = self.tokenizer.encode(body, add_special_tokens=add_special_tokens)
        out["input_ids"] = torch.tensor([ids])
        return out

    def apply_chat_template(self, *args: Any, **kwargs: Any):
        return self.tokenizer.apply_chat_template(*args, **kwargs)

    def decode(self, *args: Any, **kwargs: Any):
        return self.tokenizer.decode(*args, **kwargs)
