"""``vllm.SamplingParams`` (vLLM 0.29's fields; an unknown field is a TypeError, as vLLM's struct raises) and
``StructuredOutputsParams``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(kw_only=True)
class StructuredOutputsParams:
    json: Any = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


@dataclass(kw_only=True)
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: StructuredOutputsParams | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    output_kind: Any = None
    extra_args: dict[str, Any] | None = None

    def unsupported(self) -> list[str]:
        """The settings the stand-in's sampler cannot honour (it samples at ``temperature`` from the full
        distribution), named so a request carrying them is refused, not served differently."""
        out = [f"{k}={getattr(self, k)!r}" for k, plain in (("top_p", 1.0), ("min_p", 0.0), ("repetition_penalty", 1.0),
                                                             ("presence_penalty", 0.0), ("frequency_penalty", 0.0))
               if getattr(self, k) != plain]  # fmt: skip
        if self.top_k not in (0, -1, None):
            out.append(f"top_k={self.top_k!r}")
        for k in ("structured_outputs", "logit_bias", "allowed_token_ids", "bad_words", "stop", "stop_token_ids"):
            if getattr(self, k):
                out.append(f"{k}=...")
        if self.n != 1:
            out.append(f"n={self.n}")
        return out
