"""A CPU stand-in for the vLLM engine behind OpenRLHF's ``RolloutRayActor``: vLLM's request contract served by a
transformers model (``HFPolicy``).

Contract (OpenRLHF 0.11.x): an agent executor calls ``await llm_engine.generate(prompt_token_ids, sampling_params,
multi_modal_data={"image": [PIL images]})`` on the ``RolloutRayActor`` itself, with every image's pads expanded
(the ids the trainer will train on). The actor collapses each run of image pads to one placeholder and hands the
request to vLLM, which expands each placeholder again by its own processing of the image (the checkpoint's
processor at the checkpoint's pixel budget) and answers with a request output whose ``outputs[0]`` has
``token_ids``, ``text``, ``finish_reason`` ("stop" | "length") and, when ``sampling_params.logprobs`` is set,
``logprobs``: one ``{token_id: Logprob(logprob=...)}`` per generated token.

``LocalEngine.generate`` is the actor's half (the collapse, by OpenRLHF's own ``dedup_media_tokens``) and
``LocalEngine.serve`` vLLM's half, so a test can put ``serve`` behind the real ``RolloutRayActor``
(``tests/paravt/learners/adapters/openrlhf/vllm_standin``) or use the whole engine in process. Every prompt it
served, pads expanded as vLLM expanded them, is kept in ``served``: what the policy saw when it generated, to be
compared with what the trainer trains on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import torch

from paravt.policies.hf import HFPolicy
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
    prompt_token_ids: list[int] | None = None
    """The prompt as served, pads expanded (vLLM's field): what a caller logs, whatever other requests the engine
    served meanwhile (``served[-1]`` is another request's under concurrency)."""


def token_runs(ids: list[int], token: int) -> list[int]:
    """Lengths of the runs of ``token`` in ``ids``, in order (a prompt's image pads: one run per image)."""
    out, n = [], 0
    for t in [*ids, None]:
        if t == token:
            n += 1
        elif n:
            out.append(n)
            n = 0
    return out


def expand_placeholders(ids: list[int], pad_id: int, pads_per_image: list[int]) -> list[int]:
    """``ids`` with the i-th run of ``pad_id`` replaced by ``pads_per_image[i]`` pads (vLLM's expansion of a
    collapsed prompt); a placeholder count other than the image count is refused, as vLLM refuses it."""
    out: list[int] = []
    image = 0
    for i, token in enumerate(ids):
        if token != pad_id:
            out.append(token)
        elif i == 0 or ids[i - 1] != pad_id:  # the first pad of a run: one placeholder, one image
            if image >= len(pads_per_image):
                raise ValueError(f"the prompt holds more image placeholders than the {len(pads_per_image)} images sent")
            out += [pad_id] * pads_per_image[image]
            image += 1
    if image != len(pads_per_image):
        raise ValueError(f"the prompt holds {image} image placeholders but {len(pads_per_image)} images were sent")
    return out


class LocalEngine:
    """``llm_engine.generate`` as OpenRLHF's ``RolloutRayActor`` answers it, on a local ``HFPolicy`` loaded at the
    checkpoint's own pixel budget (as vLLM loads it); calls are serialised (the policy holds a lock)."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy
        self.served: list[list[int]] = []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data: dict | None = None) -> RequestOutput:
        """The actor's side: image pads collapsed to one placeholder each (OpenRLHF's own ``dedup_media_tokens``,
        as ``RolloutRayActor.generate`` does before vLLM), then served."""
        from openrlhf.utils.vlm_utils import dedup_media_tokens

        ids = list(prompt_token_ids)
        if multi_modal_data:
            ids = dedup_media_tokens(ids, {self.policy.image_pad_id})
        return await asyncio.to_thread(self.serve, ids, sampling_params, multi_modal_data)

    def serve(self, ids: list[int], params: Any, multi_modal_data: dict | None) -> RequestOutput:
        """vLLM's side: each image placeholder expanded to the pads of the image as the checkpoint's processor sizes
        it, then one generation."""
        images = list((multi_modal_data or {}).get("image") or [])
        if images:
            _, grids = self.policy.process_images(images)
            per_image = [int(g.prod()) // self.policy.merge_size**2 for g in grids]
            ids = expand_placeholders(list(ids), self.policy.image_pad_id, per_image)
        self.served.append(list(ids))
        out = self._generate(list(ids), params, images)
        out.prompt_token_ids = list(ids)
        return out

    def _generate(self, ids: list[int], params: Any, images: list) -> RequestOutput:
        policy = self.policy
        encoded = policy.encode_ids(ids, images)
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
    whatever the model would have written (a random-weight model at real size writes no valid call).

    The turn is read from the prompt (the assistant turns it already holds), not counted per engine: the rollouts
    of a prompt run concurrently on one engine (``RolloutRayActor.generate_responses``), each at its own turn."""

    SUBAGENT_MARKERS = (SUBAGENT_SYSTEM_PROMPT[:40], "You are analyzing a video segment")

    def __init__(self, policy: HFPolicy, turns: list[str]) -> None:
        super().__init__(policy)
        self.turns = list(turns)

    def _generate(self, ids: list[int], params: Any, images: list) -> RequestOutput:
        head = self.policy.tokenizer.decode(ids)
        if any(marker in head for marker in self.SUBAGENT_MARKERS):
            return super()._generate(ids, params, images)
        turn = head.count("<|im_start|>assistant") - 1  # the turns written so far; the last one is being prompted
        text = self.turns[min(turn, len(self.turns) - 1)]
        out_ids = self.policy.tokenizer.encode(text, add_special_tokens=False) + [self.policy.end_of_turn_id]
        encoded = self.policy.encode_ids(ids + out_ids, images)
        with torch.no_grad():
            lp = self.policy.sequence_logprobs(encoded, temperature=params.temperature)[len(ids) - 1 :]
        logprobs = [{t: Logprob(float(x))} for t, x in zip(out_ids, lp, strict=True)]
        return RequestOutput([CompletionOutput(out_ids, text, "stop", logprobs)])
