"""The names TRL's ``VLLMGeneration`` (colocate mode) takes from vLLM, answered on the CPU by a transformers model
(see README.md): ``LLM``, ``SamplingParams``, ``RequestOutput``."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .sampling_params import SamplingParams, StructuredOutputsParams

__version__ = "0.29.0"
__all__ = ["LLM", "RequestOutput", "SamplingParams", "StructuredOutputsParams"]


@dataclass
class Logprob:
    logprob: float
    rank: int = 1
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


def _log(record: dict) -> None:
    path = os.environ.get("PARAVT_VLLM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def weights_digest(model: Any) -> str:
    """A digest of every parameter's bytes, in name order (the tests compare it with the trainer's)."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


class _ModelRunnerModel:
    """``llm_engine.model_executor.driver_worker.model_runner.model``: ``load_weights`` of HF-named tensors."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.params = dict(model.named_parameters())
        self.pending: set[str] = set()

    def load_weights(self, weights: Any) -> set[str]:
        import torch

        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in self.params:
                    raise KeyError(f"vllm_standin: the model has no parameter {name!r}")
                target = self.params[name]
                if tuple(target.shape) != tuple(tensor.shape):
                    raise ValueError(f"vllm_standin: {name} is {tuple(target.shape)}, got {tuple(tensor.shape)}")
                target.copy_(tensor.to(target.dtype))
                loaded.add(name)
        self.pending |= loaded
        if self.pending >= set(self.params):  # a whole pass (TRL loads one tensor a call)
            self.pending = set()
            _log({"weights": weights_digest(self.model)})
        return loaded


class LLM:
    """``vllm.LLM``: the checkpoint loaded as vLLM loads it (``HFPolicy.from_pretrained``: its own processor and
    pixel budget); ``generate`` serves token-id prompts with their images."""

    def __init__(self, model: str, *, max_model_len: int | None = None, **engine_args: Any) -> None:
        from paravt.policies.hf import HFPolicy

        self.policy = HFPolicy.from_pretrained(model, temperature=1.0)
        self.engine_args = engine_args  # seed included: the policy samples from torch's generator
        text = getattr(self.policy.model.config, "text_config", self.policy.model.config)
        self.max_model_len = int(max_model_len or text.max_position_embeddings)
        runner = SimpleNamespace(model=_ModelRunnerModel(self.policy.model))
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=self.max_model_len),
                                          model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)))  # fmt: skip
        self.requests = 0

    def reset_prefix_cache(self) -> bool:
        return True

    def sleep(self, level: int = 1) -> None:
        pass

    def wake_up(self, tags: list[str] | None = None) -> None:
        pass

    def generate(self, prompts: Any, sampling_params: SamplingParams | None = None, use_tqdm: bool = True) -> list[RequestOutput]:
        params = sampling_params or SamplingParams()
        refused = params.unsupported()
        if refused:
            raise NotImplementedError(f"vllm_standin samples at temperature only; refused: {', '.join(refused)}")
        return [self._one(p, params) for p in (prompts if isinstance(prompts, list) else [prompts])]

    def _one(self, prompt: dict, params: SamplingParams) -> RequestOutput:
        from paravt.learners.adapters.openrlhf.local_engine import token_runs

        policy = self.policy
        ids = list(prompt["prompt_token_ids"])
        image = (prompt.get("multi_modal_data") or {}).get("image")
        images = [] if image is None else list(image) if isinstance(image, (list, tuple)) else [image]
        runs = token_runs(ids, policy.image_pad_id)
        want = []
        if images:
            _, grids = policy.process_images(images)
            want = [int(g.prod()) // policy.merge_size**2 for g in grids]
        if runs != want:  # vLLM's prompt update: each image's placeholder must be its processed size
            raise ValueError(f"vllm_standin: the prompt's image placeholders hold {runs} tokens, the {len(images)} "
                             f"images processed by the checkpoint's processor give {want}")  # fmt: skip
        if len(ids) >= self.max_model_len:
            raise ValueError(f"vllm_standin: prompt of {len(ids)} tokens, at or past max_model_len {self.max_model_len}")
        max_tokens = min(params.max_tokens or self.max_model_len, self.max_model_len - len(ids))
        [gen] = policy.generate_encoded([policy.encode_ids(ids, images)], temperature=params.temperature,
                                        max_new_tokens=max_tokens, think_prefix=False)  # fmt: skip
        text = policy.tokenizer.decode([t for t in gen.token_ids if t not in policy.eos_ids])
        logprobs = None
        if params.logprobs is not None:
            logprobs = [{t: Logprob(lp)} for t, lp in zip(gen.token_ids, gen.logprobs, strict=True)]
        self.requests += 1
        _log({"request": self.requests, "pads_per_image": runs, "images": len(images), "max_tokens": params.max_tokens,
              "prompt_tokens": len(ids), "completion_tokens": len(gen.token_ids)})  # fmt: skip
        out = CompletionOutput(0, text, list(gen.token_ids), sum(gen.logprobs), logprobs, gen.finish_reason)
        return RequestOutput(f"standin-{self.requests}", ids, [out])
